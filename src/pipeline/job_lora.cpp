#include "pipeline/job_lora.h"

#include "pipeline/few_step_presets.h"
#include "pipeline/job.h"

#include <cmath>
#include <cstdio>

namespace h3::pipeline {

namespace {

Status lora_error(const std::string& field, const Status& s, std::string* out) {
    if (out) *out = field;
    if (s.message().rfind(field, 0) == 0) return s;
    return Status(s.code(), field + ": " + s.message());
}

Status lora_error(const std::string& field, const std::string& message, std::string* out) {
    return lora_error(field, invalid_argument(message), out);
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? "none" : s;
}

} // namespace

const char* lora_mode_name(LoraMode m) {
    return m == LoraMode::kMerged ? "merged" : "runtime";
}

std::string lora_use_name(const std::string& path, double scale) {
    char buf[48];
    std::snprintf(buf, sizeof buf, ":%g", scale);
    return path + buf;
}

std::vector<std::string> JobAdapters::names() const {
    std::vector<std::string> n;
    for (const runtime::AdapterUse& u : uses) n.push_back(lora_use_name(u.name, u.strength));
    return n;
}

Status check_lora_input(const LoraJobInput& in, std::string* field) {
    if (in.lora.size() > kMaxJobAdapters)
        return lora_error("lora",
                          "a job applies at most " + std::to_string(kMaxJobAdapters) + " adapters, got " +
                              std::to_string(in.lora.size()),
                          field);
    for (size_t i = 0; i < in.lora.size(); ++i) {
        const LoraInput& l = in.lora[i];
        const std::string which = "lora[" + std::to_string(i) + "]";
        if (l.path.empty()) return lora_error("lora", which + " names no adapter (path is empty)", field);
        if (!std::isfinite(l.scale))
            return lora_error("lora", which + " " + l.path + ": the scale must be a finite number", field);
    }
    if (in.lora_mode && *in.lora_mode != "runtime" && *in.lora_mode != "merged")
        return lora_error("lora_mode", "lora_mode must be runtime or merged, got '" + *in.lora_mode + "'",
                          field);
    if (in.preset && !find_few_step_preset(*in.preset))
        return lora_error("preset", "unknown preset '" + *in.preset + "'; known: " + few_step_presets_help(),
                          field);
    for (auto [name, v] :
         {std::pair{"video_shift", &in.video_shift}, std::pair{"audio_shift", &in.audio_shift}})
        if (*v && !(std::isfinite(**v) && **v > 0))
            return lora_error(name, std::string(name) + " must be a positive number", field);
    return ok_status();
}

Status apply_lora_input(const LoraJobInput& in, bool steps_given, const LoraResolver& resolver,
                        GenerationJob& job, std::string* field) {
    H3_TRY(check_lora_input(in, field));
    // ---- schedule: explicit fields, then the preset, then what the job holds
    if (in.preset) {
        const FewStepPreset* p = find_few_step_preset(*in.preset);
        if (!steps_given) job.steps = p->steps;
        job.video_shift = p->video_shift;
        job.audio_shift = p->audio_shift;
        job.adapters.preset = p->name;
    }
    if (in.video_shift) job.video_shift = *in.video_shift;
    if (in.audio_shift) job.audio_shift = *in.audio_shift;

    // ---- adapters
    JobAdapters& a = job.adapters;
    a.mode = in.lora_mode.value_or("runtime") == "merged" ? LoraMode::kMerged : LoraMode::kRuntime;
    const bool strict = in.lora_strict.value_or(false);
    for (const LoraInput& l : in.lora) a.uses.push_back({l.path, static_cast<float>(l.scale), strict});
    if (a.mode == LoraMode::kMerged) {
        if (a.names() != resolver.merged)
            return lora_error("lora",
                              "merged adapters are fixed when the model loads (" + join(resolver.merged) +
                                  "); this request names " + join(a.names()) +
                                  " (apply per-request adapters at run time)",
                              field);
        return ok_status();
    }
    if (!resolver.merged.empty())
        return lora_error("lora",
                          "the model has adapters merged into its weights (" + join(resolver.merged) +
                              "); run-time adapters cannot be added to them",
                          field);
    if (a.uses.empty()) return ok_status();
    if (!resolver.library)
        return lora_error("lora",
                          "no adapter library is configured (the server was started without a LoRA folder), "
                          "so no request may name adapters",
                          field);
    auto set = resolver.library->request_set(a.uses);
    if (!set.ok()) return lora_error("lora", set.status(), field);
    a.set = std::move(set).value();
    return ok_status();
}

} // namespace h3::pipeline
