// ref2va conditioning inputs (spec §3, §5.4, §8.2; diffusers MiniMaxH3Ref2VAReferenceEncoderStep and
// MiniMaxH3Ref2VATextEncoderStep), shared by `h3-engine generate --reference` and the server's engine: the
// normalized references (pipeline/references) → what the conditioner presents (images; videos as their 2 fps
// frames with one timestamp per merged pair; audio as a label) and the references' encodings in request
// order:
//   - image: one frame through the video VAE encoder at its own 2048-px size (tiled), sampled with the
//   private
//     generator seeded 42, fp16-rounded, normalized (the keyframe recipe);
//   - video: its first 17n+5 frames (snapped down) through the encoder's clips, the same recipe over every
//     latent frame → [1, 24, 5n+2, h, w];
//   - audio / a video's soundtrack: stereo through the audio VAE encoder, posterior mean, normalized per
//   channel
//     → clean channel-major rows [2·A_r, 32].
// The encoders are loaded for the call and released before it returns.
#pragma once

#include "core/status.h"
#include "model/video_vae/video_vae_encoder.h"
#include "ops/context.h"
#include "pipeline/conditioner.h"
#include "pipeline/latents.h"
#include "pipeline/references.h"

#include <atomic>
#include <string>
#include <vector>

namespace h3::pipeline {

struct Ref2vaInputs {
    std::vector<ConditionerReference> conditioner; // ConditionerRequest::references (request order)
    std::vector<ReferenceCondition> references;    // GenerationRequest::references (request order)
    double encode_seconds = 0;                     // encoders' load + encode
};

struct Ref2vaOptions {
    model::VideoEncodeOptions encode = {};
    uint64_t seed = 42;                        // the recipe's private generator (every visual reference)
    const std::atomic<bool>* cancel = nullptr; // checked between references; → kCancelled
};

// What the conditioner presents for one normalized reference (an image whole, a video as its 2 fps frames with
// one timestamp per merged pair, audio as its label); needs no encoder (`h3-engine encode --reference`).
ConditionerReference conditioner_reference(const NormalizedReference& reference);

// `checkpoint_dir` is a checkpoint root with `vae` (encoder weights) when a reference is an image or a video,
// and `audio_vae` (encoder weights) when one carries audio. Errors name the reference.
Result<Ref2vaInputs> prepare_ref2va(const ops::Context& ctx, const std::string& checkpoint_dir,
                                    const std::vector<NormalizedReference>& references,
                                    const Ref2vaOptions& options = {});

} // namespace h3::pipeline
