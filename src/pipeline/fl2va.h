// fl2va conditioning inputs (spec §3 steps 2–4), a stage of pipeline::Generator: keyframes already on the
// canvas (pipeline/keyframe_image: prepare_keyframes) → the conditioner's images (presented "<Picture i>: " +
// vision tokens, spec §8.2; the conditioner runs the image processor itself) and the keyframes' conditioning
// latents from the loaded video VAE encoder (spec §9.1: one frame, tiled, sampled with a private generator
// seeded 42, normalized), in packed order. The caller leases the encoder for the call only (ModelStore), so
// nothing of it stays resident while the DiT runs unless the placement says so.
#pragma once

#include "core/status.h"
#include "model/video_vae/video_vae_encoder.h"
#include "ops/context.h"
#include "pipeline/conditioner.h"
#include "pipeline/keyframe_image.h"
#include "pipeline/latents.h"

#include <atomic>
#include <string>
#include <vector>

namespace h3::pipeline {

struct Fl2vaInputs {
    std::vector<ConditionerImage> images;     // ConditionerRequest::images (packed order, canvas-sized RGB8)
    std::vector<KeyframeCondition> keyframes; // GenerationRequest::keyframes: [1, C, 1, h, w] host f32
    double encode_seconds = 0;
};

struct Fl2vaOptions {
    model::VideoEncodeOptions encode = {};
    uint64_t seed = 42;                        // the recipe's private generator
    const std::atomic<bool>* cancel = nullptr; // checked between keyframes and tiles; → kCancelled
};

// Errors name the keyframe ("first keyframe: ...").
Result<Fl2vaInputs> prepare_fl2va(const ops::Context& ctx, const model::VideoVaeEncoder& encoder,
                                  const PreparedKeyframes& keyframes, const Fl2vaOptions& options = {});

} // namespace h3::pipeline
