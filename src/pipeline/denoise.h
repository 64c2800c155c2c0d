// The denoising loop as a pipeline stage (spec §3 step 7, §7): N−1 DiT forwards over the packed sequence,
// the Euler update of the generated rows only (conditioning rows are never written), a per-step progress
// callback, cancellation between steps and between blocks, and per-step timings.
#pragma once

#include "cache/cache_spec.h"
#include "cache/work.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/dit/dit_model.h"
#include "pipeline/layout.h"
#include "pipeline/schedule.h"

#include <atomic>
#include <functional>
#include <vector>

namespace h3::pipeline {

struct StepProgress {
    int step = 0;            // 1-based, steps finished
    int total = 0;           // forwards in the schedule
    double step_seconds = 0; // this step
    double elapsed_seconds = 0;
    double eta_seconds = 0; // mean step time × steps left
};

struct DenoiseOptions {
    std::function<void(const StepProgress&)> progress; // called after every step
    const std::atomic<bool>* cancel = nullptr;         // checked between steps and between DiT blocks
    size_t ffn_chunk_bytes = 512ull << 20;
    model::IntermediateHook hook;     // forwarded to every forward (parity work)
    cache::CacheSpec cache;           // the request's step cache (default none: no probe, no extra memory)
    model::AttentionChoice attention; // dense, or FastH3's video sparse attention (t2va / fl2va layouts)
    const model::LoraSet* lora = nullptr; // run-time adapters of the request (AdaLN tables and every forward)
    // A rank of a device group (runtime::DeviceGroup::run_spmd): every rank runs this loop over the same
    // inputs; the forwards split the work (model/dit/dit_parallel.h) and every rank ends with the same
    // latents. The steps' useful_flops are this rank's share.
    const model::DitParallel* parallel = nullptr;
    // The request state takes the workspace the DiT keeps between requests
    // (DitForwardOptions::keep_workspace).
    bool keep_workspace = false;
    // A warm-up (issue #45): only the forwards that meet one-time work a request of this shape would meet in
    // its first forward: step 0, and the first step whose attention differs from step 0's (VSA after
    // dense_first_n_steps). The latents it returns are not the request's.
    bool warm_up = false;
};

// The steps a warm-up runs (DenoiseOptions::warm_up) out of `steps` forwards under `attention`.
std::vector<int> warm_up_steps(const model::AttentionChoice& attention, int steps);

// What the loop works on. Conditioning rows lead the video rows (layout.condition_rows of them) and the
// audio rows (layout.condition_audio_rows).
struct DenoiseInputs {
    const PackedLayout* layout = nullptr;
    Tensor text;       // [L, text_dim] any float dtype
    Tensor video_rows; // [condition_rows + video_rows, 96] f32 host
    Tensor audio_rows; // [condition_audio_rows + 2A, 32] f32 host (reference rows lead, never written)
};

struct DenoiseResult {
    Tensor video_rows; // generated rows only, [video_rows, 96] f32 host
    Tensor audio_rows; // [2A, 32] f32 host
    std::vector<double> step_seconds;
    double setup_seconds = 0;   // AdaLN tables + refiner/RoPE preparation
    double loop_seconds = 0;    // the step loop, its steps (step_seconds) and what runs between them
    double to_host_seconds = 0; // the generated rows' copy to the host after the last step
    cache::WorkReport work;     // per-step blocks run/skipped, cache hits, useful FLOPs
};

// --attention vsa tiles the [text | keyframes | audio | video] layout of t2va / fl2va only; for ref2va the
// error says so and names the alternative.
Status check_attention_task(const model::AttentionChoice& attention, bool ref2va);

// Everything the loop allocates (packed inputs, AdaLN tables, request state) lives in this call's frame
// and is released on return, on success, error and cancellation alike.
Result<DenoiseResult> run_denoise(const model::DitModel& model, const DenoiseInputs& inputs,
                                  const DualSchedule& schedule, const DenoiseOptions& options = {});

} // namespace h3::pipeline
