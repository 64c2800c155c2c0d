// The t2va / fl2va / ref2va workflow up to latents: layout → noise → schedule → denoise → unpack, on a
// resolved geometry (pipeline/geometry, against the checkpoint's LatentSpec). Decoding the latents to media
// is the decoders' stage and starts from GenerationOutput. pipeline::Generator (pipeline/generator.h) runs
// the whole job around it; this is the denoising core it shares with the benches and the parity tests.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "model/dit/dit_model.h"
#include "pipeline/conditioner.h"
#include "pipeline/denoise.h"
#include "pipeline/geometry.h"
#include "pipeline/latents.h"
#include "pipeline/schedule.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace h3::pipeline {

struct GenerationRequest {
    Geometry geometry; // resolved; its spec must match the model (latent and audio channels, patch, text_dim)
    int steps = 50;    // grid points (terminal 0 included): steps−1 forwards
    std::vector<int> rungs; // non-empty: the rung schedule (FastH3, pipeline/schedule.h) instead of `steps`
    uint64_t seed = 0;
    double video_shift = kDefaultVideoShift; // the checkpoint's scheduler configs
    double audio_shift = kDefaultAudioShift;
    // fl2va: keyframe latents from the video VAE encoder, in packed order. Empty for t2va.
    std::vector<KeyframeCondition> keyframes;
    // ref2va: the references' encodings in request order (pipeline/ref2va). Empty for t2va / fl2va.
    std::vector<ReferenceCondition> references;
    std::optional<Tensor> video_noise; // [1, C, T, h, w] instead of the seeded draw
    std::optional<Tensor> audio_noise; // [2, C_a, A]
    TorchNormalKernel noise_kernel = TorchNormalKernel::kAvx2;
    cache::CacheSpec cache;           // step cache policy (none = lossless)
    model::AttentionChoice attention; // dense, or FastH3's video sparse attention (t2va / fl2va)
};

// Where generate_latents spent its time (seconds), so that a request's denoise stage adds up: the stage is
// these parts plus what the caller does around the call (leasing the DiT, checking adapters).
struct DenoiseParts {
    double noise_and_layout = 0;   // the initial latents (seeded noise drawn on the host), the packed layout
    double setup = 0;              // run_denoise before its first step (DenoiseResult::setup_seconds)
    double steps = 0;              // the steps' own seconds, summed (step_seconds)
    double loop_outside_steps = 0; // the step loop around them: progress reports, cache bookkeeping
    double to_host = 0;            // the generated rows' copy to the host after the last step
    double unpatchify = 0;         // rows back to [1, C, T, h, w] / [2, C_a, A] latents on the host
    double sum() const {
        return noise_and_layout + setup + steps + loop_outside_steps + to_host + unpatchify;
    }
    // What a stage of `stage_seconds` spent around generate_latents (leasing the DiT, checking adapters).
    double around(double stage_seconds) const { return std::max(0.0, stage_seconds - sum()); }
};

struct GenerationOutput {
    Geometry geometry;
    Tensor video_noise, video_latents; // [1, C, T, h, w] f32
    Tensor audio_noise, audio_latents; // [2, C_a, A] f32
    std::vector<double> step_seconds;
    double setup_seconds = 0;
    DenoiseParts parts;
    cache::WorkReport work;
};

// Checks the request (geometry against the model, steps, shifts, conditioning width and tags) before any
// heavy work.
Result<GenerationOutput> generate_latents(const model::DitModel& model, const Conditioning& conditioning,
                                          const GenerationRequest& request,
                                          const DenoiseOptions& options = {});

} // namespace h3::pipeline
