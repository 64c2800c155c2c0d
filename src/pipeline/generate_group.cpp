#include "pipeline/generate_group.h"

#include <cstring>
#include <map>

namespace h3::pipeline {

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    return a.shape() == b.shape() && a.dtype() == b.dtype() &&
           std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

Status check_group_model(const model::DitModel& model, const runtime::ParallelPlan& plan) {
    H3_TRY(model::check_parallel_degrees(model.config(), plan.sp, plan.tp, plan.ring));
    // A weight source serves one rank at a time. Tensor-parallel ranks stream their own slices
    // (DitTpShard::source); sequence-parallel ranks read the model's blocks, so only one of them may live in
    // this process.
    if (model.block_source() && plan.tp == 1 && !plan.process.active() && plan.world() > 1)
        return invalid_argument(
            "parallel.sp / parallel.ring: the ranks of one process share one DiT, whose block weights must "
            "then be resident in the native dtype (got " +
            model.residency_describe() +
            "); make them resident, split the weights instead (parallel.tp: every rank streams its own "
            "slices), or run one rank per process (the launcher convention)");
    return check_group_device(plan, model.context().device);
}

} // namespace

Status check_group_device(const runtime::ParallelPlan& plan, const Device& device) {
    if (plan.gpus.size() > 1 && !device.is_cpu() && !plan.process.active())
        return unimplemented(
            "parallel.gpus: " + std::to_string(plan.gpus.size()) +
            " devices for the ranks of one process, which share the model's device (one DiT, no replica "
            "per GPU); run one process per GPU (the launcher convention: RANK, WORLD_SIZE, LOCAL_RANK)");
    return ok_status();
}

Result<GenerationOutput>
generate_latents_on_group(const model::DitModel& model, const Conditioning& conditioning,
                          const GenerationRequest& request, const DenoiseOptions& options,
                          const runtime::ParallelPlan& plan, const GroupOptions& go) {
    H3_TRY(model::check_parallel_degrees(model.config(), plan.sp, plan.tp, plan.ring));
    if (!plan.active()) return generate_latents(model, conditioning, request, options);
    H3_TRY(check_group_model(model, plan));
    H3_ASSIGN_OR_RETURN(auto group, runtime::DeviceGroup::create(plan, model.context(), go.comm));
    // every rank gets the same inputs (the Generator broadcasts them from rank 0 instead)
    const EncodedInputs same{
        .conditioning = conditioning, .keyframes = request.keyframes, .references = request.references};
    return generate_latents_on_group(*group, model, std::vector<EncodedInputs>(group->size(), same), request,
                                     options, go);
}

Result<GenerationOutput> generate_latents_on_group(runtime::DeviceGroup& group, const model::DitModel& model,
                                                   const std::vector<EncodedInputs>& inputs,
                                                   const GenerationRequest& request,
                                                   const DenoiseOptions& options, const GroupOptions& go) {
    const runtime::ParallelPlan& plan = group.plan();
    H3_TRY(check_group_model(model, plan));
    if (inputs.size() != static_cast<size_t>(group.size()))
        return internal_error("device group: " + std::to_string(inputs.size()) + " ranks' inputs for " +
                              std::to_string(group.size()) + " ranks");
    // Tensor parallel: the weight slices of this process's tp ranks, shared by the ranks of one tp_rank —
    // except slices behind a weight source (int8, layerwise), which serve one rank each; the run-time
    // adapters' slices per tp_rank.
    const bool own_source = model.block_source() != nullptr;
    std::map<int, std::shared_ptr<const model::DitTpShard>> shards; // by tp_rank, or local rank (own_source)
    std::map<int, std::shared_ptr<const model::LoraSet>> loras;     // by tp_rank
    if (plan.tp > 1)
        for (int l = 0; l < group.size(); ++l) {
            const int t = group.rank(l).tp_rank, key = own_source ? l : t;
            if (!shards.count(key)) {
                H3_ASSIGN_OR_RETURN(shards[key], model.make_tp_shard(t, plan.tp));
            }
            if (options.lora && !loras.count(t)) {
                H3_ASSIGN_OR_RETURN(loras[t], model.make_tp_lora(*options.lora, t, plan.tp));
            }
        }
    std::vector<GenerationOutput> outs(static_cast<size_t>(group.size()));
    H3_TRY(group.run_spmd([&](runtime::DeviceGroup::Rank& r) -> Status {
        if (plan.tp > 1) {
            r.dit.tp_shard = shards.at(own_source ? r.local : r.tp_rank);
            r.dit.tp_lora = options.lora ? loras.at(r.tp_rank) : nullptr;
        }
        DenoiseOptions o = options;
        o.parallel = &r.dit;
        if (r.local != 0) o.progress = nullptr; // this process's first rank reports
        if (go.per_rank) H3_TRY(go.per_rank(r, o));
        const EncodedInputs& in = inputs[static_cast<size_t>(r.local)];
        GenerationRequest rq = request;
        rq.keyframes = in.keyframes;
        rq.references = in.references;
        H3_ASSIGN_OR_RETURN(outs[static_cast<size_t>(r.local)],
                            generate_latents(model, in.conditioning, rq, o));
        return ok_status();
    }));
    GenerationOutput out = std::move(outs[0]);
    for (size_t r = 1; r < outs.size(); ++r)
        if (!same_bits(out.video_latents, outs[r].video_latents) ||
            !same_bits(out.audio_latents, outs[r].audio_latents))
            return internal_error("device group: rank " + std::to_string(r) +
                                  " ended with other latents than rank 0 (the ranks must agree bit for bit)");
    // The group's work: the same decisions on every rank, the FLOPs summed.
    out.work.ranks = plan.world();
    out.work.rank_useful_flops.assign(outs.size(), 0.0);
    for (size_t r = 0; r < outs.size(); ++r) {
        const cache::WorkReport& w = r == 0 ? out.work : outs[r].work;
        out.work.rank_useful_flops[r] = w.useful_flops();
        if (r == 0) continue;
        for (size_t i = 0; i < out.work.steps.size() && i < w.steps.size(); ++i) {
            if (w.steps[i].cache_hit != out.work.steps[i].cache_hit)
                return internal_error("device group: rank " + std::to_string(r) + " decided step " +
                                      std::to_string(i) + "'s cache otherwise than rank 0");
            out.work.steps[i].useful_flops += w.steps[i].useful_flops;
        }
    }
    if (plan.process.active()) // one rank per process: the group's total assumes every rank did this share
        for (auto& st : out.work.steps) st.useful_flops *= plan.world();
    return out;
}

} // namespace h3::pipeline
