#include "pipeline/job_attention.h"

#include "pipeline/denoise.h"

namespace h3::pipeline {

namespace {

Status attention_error(const Status& s, std::string* field) {
    if (field) *field = "attention";
    if (s.message().rfind("attention", 0) == 0) return s;
    return Status(s.code(), "attention: " + s.message());
}

bool asks_ref2va(const JobInput& in) {
    return !in.references.empty() || (in.task && *in.task == task_name(Task::kRef2va));
}

} // namespace

Status check_attention_field(const JobInput& in, std::string* field) {
    if (!in.attention) return ok_status();
    auto a = model::parse_attention_choice(*in.attention);
    if (!a.ok()) return attention_error(a.status(), field);
    if (Status s = check_attention_task(*a, asks_ref2va(in)); !s.ok()) return attention_error(s, field);
    return ok_status();
}

Status resolve_job_attention(const JobInput& in, const runtime::CheckpointInfo& info, GenerationJob& job,
                             std::string* field) {
    // the sidecar describes the student (transformer/): its defaults apply to the tasks that run on it
    const model::FastH3Contract* fc = info.fasth3 && job.task != Task::kRef2va ? &*info.fasth3 : nullptr;
    if (in.attention) {
        auto a = model::parse_attention_choice(*in.attention);
        if (!a.ok()) return attention_error(a.status(), field);
        job.attention = *a;
    } else if (fc && fc->vsa) {
        job.attention.kind = model::AttentionChoice::Kind::kVsa;
        job.attention.vsa.sparsity = fc->vsa_sparsity;
    }
    if (fc && !in.num_inference_steps) {
        job.steps = fc->num_inference_steps;
        job.rungs = fc->grid_rungs;
    }
    if (Status s = check_attention_task(job.attention, job.task == Task::kRef2va); !s.ok())
        return attention_error(s, field);
    if (job.attention.is_vsa() && info.dit)
        for (int l : job.attention.vsa.dense_layers)
            if (l >= info.dit->num_layers)
                return attention_error(invalid_argument("attention vsa: dense_layers holds block " +
                                                        std::to_string(l) + " but the DiT has " +
                                                        std::to_string(info.dit->num_layers) + " blocks"),
                                       field);
    return ok_status();
}

} // namespace h3::pipeline
