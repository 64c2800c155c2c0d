// Latent ⇄ row conversions and the request's noise draws (spec §3 step 5, §5.1).
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "core/torch_generator.h"
#include "pipeline/geometry.h"
#include "pipeline/layout.h"

#include <optional>
#include <vector>

namespace h3::pipeline {

inline constexpr float kKeyframeNoiseAug = 0.999f;

// [1, C, T, h, w] → rows [T·(h/ph)·(w/pw), C·ph·pw] (frame-major, then row-major; column (c·ph + a)·pw + b).
Tensor patchify_video(const Tensor& latents, int patch_h, int patch_w);
// The inverse, rows → [1, C, T, h, w].
Tensor unpatchify_video(const Tensor& rows, int channels, int frames, int h, int w, int patch_h, int patch_w);
// [channels, C, A] ⇄ channel-major rows [channels·A, C] (stereo: [2, 32, A] ⇄ [2A, 32]).
Tensor audio_to_rows(const Tensor& audio);
Tensor rows_to_audio(const Tensor& rows, int audio_latents);

// One fl2va keyframe: where it sits and its normalized VAE latents [1, C, 1, h, w] (from the video VAE
// encoder, spec §3 step 4: sampled with seed 42, fp16-rounded, (z − μ)/σ).
struct KeyframeCondition {
    KeyframeAnchor anchor = KeyframeAnchor::kFirst;
    Tensor latents;
};

// One ref2va reference's conditioning, encoded at its own size (pipeline/ref2va).
struct ReferenceCondition {
    ReferenceKind kind = ReferenceKind::kImage;
    Tensor latents; // kImage / kVideo: [1, C, T, h, w] normalized (seed-42 sample, fp16-rounded)
    Tensor
        audio_rows; // kAudio, or a video's soundtrack: [2·A_r, C_a] normalized posterior mean; else undefined
};
// The layout block a reference occupies.
ReferenceBlock reference_block(const ReferenceCondition& reference, const model::LatentSpec& spec);

struct NoiseRequest {
    uint64_t seed = 0;
    TorchNormalKernel kernel = TorchNormalKernel::kAvx2;
    std::vector<KeyframeCondition> keyframes;
    std::vector<ReferenceCondition> references; // ref2va, request order (keyframes then empty)
    std::optional<Tensor> video_noise;          // [1, C, T, h, w]: used instead of the draw
    std::optional<Tensor> audio_noise;          // [2, C_a, A]: used instead of the draw
};

struct InitialLatents {
    Tensor video_noise; // [1, C, T, h, w] f32 (drawn or given)
    Tensor audio_noise; // [2, C_a, A] f32
    Tensor
        condition_rows; // [K·rows_per_frame, patch dim] f32: 0.999·z + 0.001·ε, patchified (empty for t2va)
    Tensor condition_audio_rows; // ref2va: [Σ 2·A_r, C_a] f32 clean reference audio rows (else undefined)
    Tensor video_rows;           // [T·rows_per_frame, patch dim] f32
    Tensor audio_rows;           // [2A, C_a] f32
};

// Draws in the reference's order from one generator: one draw per keyframe / visual reference (its latent
// shape; reference audio rows are clean and draw nothing),
// then the video noise [1,C,T,h,w], then the audio noise as rows [2A, C_a]. A given tensor skips its draw.
// The channel counts and the patch are geometry.spec's.
Result<InitialLatents> prepare_latents(const Geometry& geometry, const NoiseRequest& request);

} // namespace h3::pipeline
