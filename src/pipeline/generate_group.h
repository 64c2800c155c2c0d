// generate_latents on a device group (issue #17): every rank of a runtime::DeviceGroup runs the same
// request's denoise loop (pipeline/generate.h) with its DiT share (model/dit/dit_parallel.h); the ranks end
// with the same latents (checked bit for bit) and rank 0's output is the job's. The ranks share one DiT in
// this process (CPU ranks, or a model per device where the caller gives one per rank), which must keep its
// block weights resident (a streaming weight source serves one forward at a time).
#pragma once

#include "pipeline/generate.h"
#include "pipeline/group_broadcast.h"
#include "runtime/device_group.h"

#include <functional>
#include <vector>

namespace h3::pipeline {

struct GroupOptions {
    ops::CommOptions comm;
    // Called on every rank before its loop (tests inject a failing rank through it); may be empty.
    std::function<Status(const runtime::DeviceGroup::Rank&, DenoiseOptions&)> per_rank;
};

// The ranks of one process share the model's device: a CUDA plan with --gpus (several devices in one
// process) is refused (kUnimplemented, naming the launcher as the way to run one process per GPU).
Status check_group_device(const runtime::ParallelPlan& plan, const Device& device);

// `options.progress` is called from rank 0 only. The work report totals the ranks (per step: blocks and
// hits as every rank saw them — they agree —, useful FLOPs summed) and lists each rank's share.
Result<GenerationOutput>
generate_latents_on_group(const model::DitModel& model, const Conditioning& conditioning,
                          const GenerationRequest& request, const DenoiseOptions& options,
                          const runtime::ParallelPlan& plan, const GroupOptions& group = {});

// On a group the caller made (it spans the job's stages): local rank r denoises with inputs[r] (what it
// received from rank 0, pipeline/group_broadcast.h) in place of request's keyframes and references.
Result<GenerationOutput> generate_latents_on_group(runtime::DeviceGroup& group, const model::DitModel& model,
                                                   const std::vector<EncodedInputs>& inputs,
                                                   const GenerationRequest& request,
                                                   const DenoiseOptions& options,
                                                   const GroupOptions& go = {});

} // namespace h3::pipeline
