#include "pipeline/ref2va.h"

#include "model/audio_vae/audio_vae.h"
#include "model/audio_vae/audio_vae_encoder.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

namespace h3::pipeline {

namespace {

ConditionerImage to_conditioner_image(const io::RgbImage& im) {
    return {im.width, im.height, im.pixels};
}

ConditionerImage frame_of(const Tensor& frames, int64_t i) {
    ConditionerImage im;
    im.height = static_cast<int>(frames.dim(1));
    im.width = static_cast<int>(frames.dim(2));
    const size_t bytes = static_cast<size_t>(im.width) * im.height * 3;
    const uint8_t* p = frames.data_as<uint8_t>() + static_cast<size_t>(i) * bytes;
    im.rgb.assign(p, p + bytes);
    return im;
}

// A view, not a copy (a release-size reference clip is ~0.4 GB of frames).
Tensor first_frames(const Tensor& frames, int64_t n) {
    return frames.slice(0, 0, n);
}

std::string label(size_t i, const NormalizedReference& r) {
    std::string s = "reference " + std::to_string(i + 1) + " (" + reference_kind_name(r.kind);
    if (!r.source.empty()) s += " " + r.source;
    return s + ")";
}

} // namespace

ConditionerReference conditioner_reference(const NormalizedReference& r) {
    ConditionerReference cr;
    cr.kind = r.kind;
    cr.has_audio = r.has_audio();
    if (r.kind == ReferenceKind::kImage) {
        cr.image = to_conditioner_image(r.image);
    } else if (r.kind == ReferenceKind::kVideo) {
        const ConditionerFrames cf = sample_conditioner_frames(r.frames.dim(0));
        for (int64_t k : cf.indices) cr.frames.push_back(frame_of(r.frames, k));
        cr.block_timestamps = cf.block_timestamps;
    }
    return cr;
}

Ref2vaNeeds ref2va_needs(const std::vector<NormalizedReference>& refs) {
    Ref2vaNeeds n;
    for (const NormalizedReference& r : refs) {
        n.video_encoder |= r.kind != ReferenceKind::kAudio;
        n.audio_encoder |= r.has_audio();
    }
    return n;
}

Result<Ref2vaInputs> prepare_ref2va(const ops::Context& ctx, const Ref2vaEncoders& enc,
                                    const std::vector<NormalizedReference>& refs, const Ref2vaOptions& o) {
    if (refs.empty()) return invalid_argument("ref2va needs at least one reference");
    const auto t0 = std::chrono::steady_clock::now();
    for (const NormalizedReference& r : refs) {
        if (r.kind == ReferenceKind::kAudio && !r.has_audio())
            return invalid_argument("an audio reference carries no waveform");
        if (r.kind == ReferenceKind::kVideo && (!r.frames.defined() || r.frames.rank() != 4 ||
                                                r.frames.dim(0) < 1 || r.frames.dtype() != DType::kU8))
            return invalid_argument("a video reference carries no RGB8 frames");
    }
    const Ref2vaNeeds needs = ref2va_needs(refs);
    if (needs.video_encoder && !enc.video)
        return internal_error("ref2va: image and video references need the video VAE encoder");
    if (needs.audio_encoder && !enc.audio)
        return internal_error("ref2va: audio references and soundtracks need the audio VAE encoder");

    model::VideoEncodeOptions eo = o.encode;
    if (o.cancel) eo.cancel = o.cancel; // the encoders check it between clips and tiles, blocks and channels
    const model::AudioVaeRunOptions ao{.cancel = o.cancel};
    const auto started = [&](const char* encoder) {
        if (o.started) o.started(encoder);
    };
    Ref2vaInputs out;
    for (size_t i = 0; i < refs.size(); ++i) {
        if (o.cancel && o.cancel->load()) return cancelled("reference encoding cancelled");
        const NormalizedReference& r = refs[i];
        const std::string what = label(i, r);
        ReferenceCondition rc;
        rc.kind = r.kind;
        if (r.kind == ReferenceKind::kImage) {
            Tensor pixels = Tensor::host(Shape{r.image.height, r.image.width, 3}, DType::kU8);
            std::memcpy(pixels.data(), r.image.pixels.data(), r.image.pixels.size());
            started("video");
            auto z = model::encode_keyframe(ctx, *enc.video, pixels, eo, o.seed);
            if (!z.ok())
                return z.status().code() == ErrorCode::kCancelled ? z.status()
                                                                  : z.status().with_context(what);
            rc.latents = std::move(z).value();
        } else if (r.kind == ReferenceKind::kVideo) {
            const int64_t n = std::min(r.frames.dim(0), o.spec.align_frames_down(r.frames.dim(0)));
            started("video");
            auto post = model::encode_video(ctx, *enc.video, first_frames(r.frames, n), eo);
            if (!post.ok())
                return post.status().code() == ErrorCode::kCancelled ? post.status()
                                                                     : post.status().with_context(what);
            rc.latents = model::sample_normalized_latent(*post, enc.video->config, o.seed);
        }
        if (r.has_audio()) {
            started("audio");
            auto rows = model::encode_reference_audio_rows(ctx, *enc.audio, enc.audio->config, r.audio, ao);
            if (!rows.ok())
                return rows.status().code() == ErrorCode::kCancelled
                           ? rows.status()
                           : rows.status().with_context(what + " audio");
            rc.audio_rows = std::move(rows).value();
        }
        out.conditioner.push_back(conditioner_reference(r));
        out.references.push_back(std::move(rc));
    }
    out.encode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

} // namespace h3::pipeline
