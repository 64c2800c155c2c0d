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

// [1, C, T, h, w] → rows [T·(h/2)·(w/2), C·4] (frame-major, then row-major; column c·4 + ph·2 + pw).
Tensor patchify_video(const Tensor& latents, int patch_h = 2, int patch_w = 2);
// The inverse, rows → [1, C, T, h, w].
Tensor unpatchify_video(const Tensor& rows, int channels, int frames, int h, int w, int patch_h = 2,
                        int patch_w = 2);
// [2, 32, A] ⇄ channel-major rows [2A, 32].
Tensor audio_to_rows(const Tensor& audio);
Tensor rows_to_audio(const Tensor& rows, int audio_latents);

// One fl2va keyframe: where it sits and its normalized VAE latents [1, 24, 1, h, w] (from the video VAE
// encoder, spec §3 step 4: sampled with seed 42, fp16-rounded, (z − μ)/σ).
struct KeyframeCondition {
    KeyframeAnchor anchor = KeyframeAnchor::kFirst;
    Tensor latents;
};

// One ref2va reference's conditioning, encoded at its own size (pipeline/ref2va).
struct ReferenceCondition {
    ReferenceKind kind = ReferenceKind::kImage;
    Tensor latents; // kImage / kVideo: [1, 24, T, h, w] normalized (seed-42 sample, fp16-rounded)
    Tensor
        audio_rows; // kAudio, or a video's soundtrack: [2·A_r, 32] normalized posterior mean; else undefined
};
// The layout block a reference occupies.
ReferenceBlock reference_block(const ReferenceCondition& reference);

struct NoiseRequest {
    uint64_t seed = 0;
    TorchNormalKernel kernel = TorchNormalKernel::kAvx2;
    std::vector<KeyframeCondition> keyframes;
    std::vector<ReferenceCondition> references; // ref2va, request order (keyframes then empty)
    std::optional<Tensor> video_noise;          // [1, 24, T, h, w]: used instead of the draw
    std::optional<Tensor> audio_noise;          // [2, 32, A]: used instead of the draw
};

struct InitialLatents {
    Tensor video_noise;    // [1, 24, T, h, w] f32 (drawn or given)
    Tensor audio_noise;    // [2, 32, A] f32
    Tensor condition_rows; // [K·rows_per_frame, 96] f32: 0.999·z + 0.001·ε, patchified (empty for t2va)
    Tensor condition_audio_rows; // ref2va: [Σ 2·A_r, 32] f32 clean reference audio rows (else undefined)
    Tensor video_rows;           // [T·rows_per_frame, 96] f32
    Tensor audio_rows;           // [2A, 32] f32
};

// Draws in the reference's order from one generator: one draw per keyframe / visual reference (its latent
// shape; reference audio rows are clean and draw nothing),
// then the video noise [1,24,T,h,w], then the audio noise as rows [2A, 32]. A given tensor skips its draw.
Result<InitialLatents> prepare_latents(const Geometry& geometry, const NoiseRequest& request);

} // namespace h3::pipeline
