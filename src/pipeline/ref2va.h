// ref2va conditioning inputs (spec §3, §5.4, §8.2; diffusers MiniMaxH3Ref2VAReferenceEncoderStep and
// MiniMaxH3Ref2VATextEncoderStep), a stage of pipeline::Generator: the normalized references
// (pipeline/references) → what the conditioner presents (images; videos as their 2 fps frames with one
// timestamp per merged pair; audio as a label) and the references' encodings in request order, from the
// loaded encoders:
//   - image: one frame through the video VAE encoder at its own size (tiled), sampled with the private
//     generator seeded 42, fp16-rounded, normalized (the keyframe recipe);
//   - video: its first 17n+5 frames (snapped down) through the encoder's clips, the same recipe over every
//     latent frame → [1, C, 5n+2, h, w];
//   - audio / a video's soundtrack: stereo through the audio VAE encoder, posterior mean, normalized per
//     channel → clean channel-major rows [2·A_r, C_a].
// The caller leases the encoders the references need (ref2va_needs) for the call only.
#pragma once

#include "core/status.h"
#include "model/audio_vae/audio_vae_encoder.h"
#include "model/video_vae/video_vae_encoder.h"
#include "ops/context.h"
#include "pipeline/conditioner.h"
#include "pipeline/latents.h"
#include "pipeline/references.h"

#include <atomic>
#include <functional>
#include <string>
#include <vector>

namespace h3::pipeline {

struct Ref2vaInputs {
    std::vector<ConditionerReference> conditioner; // ConditionerRequest::references (request order)
    std::vector<ReferenceCondition> references;    // GenerationRequest::references (request order)
    double encode_seconds = 0;
};

struct Ref2vaOptions {
    model::VideoEncodeOptions encode = {};
    model::LatentSpec spec = {}; // the checkpoint's (a video's frames snapped to 17n+5)
    uint64_t seed = 42;          // the recipe's private generator (every visual reference)
    // checked between references and inside the encoders; → kCancelled
    const std::atomic<bool>* cancel = nullptr;
    // optional: called before each encoder call with "video" or "audio" (progress, tests that cancel there)
    std::function<void(const char* encoder)> started;
};

// What the conditioner presents for one normalized reference (an image whole, a video as its 2 fps frames
// with one timestamp per merged pair, audio as its label); needs no encoder (`h3-engine encode --reference`).
ConditionerReference conditioner_reference(const NormalizedReference& reference);

// Which encoders a list of references needs: the video VAE encoder for an image or a video, the audio VAE
// encoder for audio (an audio reference, a video's soundtrack).
struct Ref2vaNeeds {
    bool video_encoder = false, audio_encoder = false;
};
Ref2vaNeeds ref2va_needs(const std::vector<NormalizedReference>& references);

// The loaded encoders (each required when ref2va_needs says so). Errors name the reference.
struct Ref2vaEncoders {
    const model::VideoVaeEncoder* video = nullptr;
    const model::AudioVaeEncoder* audio = nullptr;
};
Result<Ref2vaInputs> prepare_ref2va(const ops::Context& ctx, const Ref2vaEncoders& encoders,
                                    const std::vector<NormalizedReference>& references,
                                    const Ref2vaOptions& options = {});

} // namespace h3::pipeline
