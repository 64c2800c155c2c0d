#include "pipeline/references.h"

#include "pipeline/audio_resample.h"
#include "pipeline/image_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace h3::pipeline {

const char* reference_kind_name(ReferenceKind kind) {
    switch (kind) {
    case ReferenceKind::kImage:
        return "image";
    case ReferenceKind::kVideo:
        return "video";
    case ReferenceKind::kAudio:
        return "audio";
    }
    return "?";
}

double ReferenceMedia::clip_seconds() const {
    if (kind == ReferenceKind::kVideo)
        return frames.defined() && fps > 0 ? static_cast<double>(frames.dim(0)) / fps : 0.0;
    if (kind == ReferenceKind::kAudio)
        return audio.defined() && sample_rate > 0 ? static_cast<double>(audio.dim(1)) / sample_rate : 0.0;
    return 0.0;
}

namespace {

std::string label(size_t i, const ReferenceMedia& r) {
    std::string s = "reference " + std::to_string(i + 1) + " (" + reference_kind_name(r.kind);
    if (!r.source.empty()) s += " " + r.source;
    return s + ")";
}

} // namespace

Status validate_references(const std::vector<ReferenceMedia>& refs, const ReferenceLimits& lim) {
    if (refs.empty()) return invalid_argument("ref2va needs at least one reference");
    std::vector<std::string> errors;
    int n[3] = {0, 0, 0};
    for (size_t i = 0; i < refs.size(); ++i) {
        const ReferenceMedia& r = refs[i];
        ++n[static_cast<int>(r.kind)];
        switch (r.kind) {
        case ReferenceKind::kImage:
            if (r.image.empty()) errors.push_back(label(i, r) + " has no pixels");
            break;
        case ReferenceKind::kVideo:
            if (!r.frames.defined() || r.frames.rank() != 4 || r.frames.dim(0) < 1 || r.frames.dim(3) != 3 ||
                r.frames.dtype() != DType::kU8)
                errors.push_back(label(i, r) + " has no RGB8 frames");
            else if (!(r.fps > 0) || !std::isfinite(r.fps))
                errors.push_back(label(i, r) + " has no valid frame rate (" + std::to_string(r.fps) + ")");
            else if (resample_to_24fps(r.frames.dim(0), r.fps).empty())
                errors.push_back(label(i, r) + ": its " + std::to_string(r.frames.dim(0)) + " frame(s) at " +
                                 std::to_string(r.fps) + " fps leave no frame at 24 fps");
            break;
        case ReferenceKind::kAudio:
            if (!r.audio.defined() || r.audio.dim(1) < 1) errors.push_back(label(i, r) + " has no samples");
            break;
        }
        if (r.has_audio()) {
            if (!r.audio.defined() || r.audio.rank() != 2 || r.audio.dtype() != DType::kF32)
                errors.push_back(label(i, r) + ": audio must be [channels, samples] f32");
            else if (r.audio.dim(0) != 1 && r.audio.dim(0) != 2)
                errors.push_back(label(i, r) + " has " + std::to_string(r.audio.dim(0)) +
                                 " audio channels; references must be mono or stereo");
            if (r.sample_rate <= 0)
                errors.push_back(label(i, r) + " has no valid sample rate (" + std::to_string(r.sample_rate) +
                                 ")");
        }
    }
    const int images = n[0], videos = n[1], audios = n[2];
    if (images > lim.max_images)
        errors.push_back(std::to_string(images) + " image references; at most " +
                         std::to_string(lim.max_images));
    if (videos > lim.max_videos)
        errors.push_back(std::to_string(videos) + " video references; at most " +
                         std::to_string(lim.max_videos));
    if (audios > lim.max_audios)
        errors.push_back(std::to_string(audios) + " audio references; at most " +
                         std::to_string(lim.max_audios));
    if (static_cast<int>(refs.size()) > lim.max_references)
        errors.push_back(std::to_string(refs.size()) + " references; at most " +
                         std::to_string(lim.max_references) + " in all");
    if (audios > 0 && images == 0 && videos == 0)
        errors.push_back("audio references cannot be used alone: add at least one image or video reference");
    if (errors.empty()) return ok_status();
    std::string msg = "references: ";
    for (size_t i = 0; i < errors.size(); ++i) msg += (i ? "; " : "") + errors[i];
    return invalid_argument(msg);
}

Result<Canvas> reference_image_size(int width, int height, int short_edge, int multiple) {
    if (width <= 0 || height <= 0)
        return invalid_argument("a reference image must have a positive size, got " + std::to_string(width) +
                                "x" + std::to_string(height));
    if (width > 4 * static_cast<int64_t>(height) || height > 4 * static_cast<int64_t>(width))
        return invalid_argument("a reference image must be within 1:4 and 4:1, got " + std::to_string(width) +
                                "x" + std::to_string(height));
    const double scale = static_cast<double>(short_edge) / std::min(width, height);
    const double m = multiple;
    // Python: max(m, round(h·scale/m)·m) — round() is half to even, as nearbyint in the default mode.
    Canvas c;
    c.height = static_cast<int>(std::max(m, std::nearbyint(height * scale / m) * m));
    c.width = static_cast<int>(std::max(m, std::nearbyint(width * scale / m) * m));
    return c;
}

std::vector<int64_t> resample_to_24fps(int64_t n, double fps) {
    std::vector<int64_t> out;
    if (fps == static_cast<double>(kFps)) {
        for (int64_t i = 0; i < n; ++i) out.push_back(i);
        return out;
    }
    const double scale = static_cast<double>(kFps) / fps;
    auto slot = [&](int64_t i) {
        return static_cast<int64_t>(std::floor(static_cast<double>(i) * scale + 0.5));
    };
    for (int64_t i = 0; i < n; ++i) {
        const int64_t next = slot(i + 1); // i + 1 == n: the stream's end
        for (int64_t s = slot(i); s < next; ++s) out.push_back(i);
    }
    return out;
}

ConditionerFrames sample_conditioner_frames(int64_t frames, double fps, double sample_fps,
                                            int temporal_patch) {
    ConditionerFrames out;
    const double stride = fps / sample_fps;
    double cursor = 0.0;
    while (static_cast<int64_t>(std::nearbyint(cursor)) < frames) {
        const int64_t k = static_cast<int64_t>(std::nearbyint(cursor));
        if (out.indices.empty() || k > out.indices.back()) out.indices.push_back(k);
        cursor += stride;
    }
    std::vector<double> ts;
    for (size_t k = 0; k < out.indices.size(); ++k) ts.push_back(static_cast<double>(k) / sample_fps);
    while (!ts.empty() && ts.size() % static_cast<size_t>(temporal_patch) != 0) ts.push_back(ts.back());
    for (size_t k = 0; k < ts.size(); k += static_cast<size_t>(temporal_patch))
        out.block_timestamps.push_back((ts[k] + ts[k + static_cast<size_t>(temporal_patch) - 1]) / 2);
    return out;
}

namespace {

io::RgbImage frame_image(const Tensor& frames, int64_t i) {
    const int h = static_cast<int>(frames.dim(1)), w = static_cast<int>(frames.dim(2));
    io::RgbImage im(w, h);
    std::memcpy(im.pixels.data(), frames.data_as<uint8_t>() + i * im.pixels.size(), im.pixels.size());
    return im;
}

Result<Tensor> normalize_waveform(const ReferenceMedia& r, const NormalizeOptions& o) {
    const int64_t keep = std::min<int64_t>(
        r.audio.dim(1), static_cast<int64_t>(static_cast<double>(o.num_frames) / kFps * r.sample_rate));
    const int64_t ch = r.audio.dim(0);
    Tensor stereo = Tensor::host(Shape{2, keep}, DType::kF32);
    const float* src = r.audio.data_as<float>();
    for (int c = 0; c < 2; ++c)
        std::memcpy(stereo.data_as<float>() + c * keep, src + (ch == 1 ? 0 : c) * r.audio.dim(1),
                    static_cast<size_t>(keep) * sizeof(float));
    if (r.sample_rate == o.spec.audio_sample_rate) return stereo;
    return resample_audio(stereo, r.sample_rate, o.spec.audio_sample_rate);
}

} // namespace

Result<std::vector<NormalizedReference>> normalize_references(const std::vector<ReferenceMedia>& refs,
                                                              const NormalizeOptions& o) {
    std::vector<NormalizedReference> out;
    for (size_t i = 0; i < refs.size(); ++i) {
        const ReferenceMedia& r = refs[i];
        const std::string what = label(i, r);
        NormalizedReference n;
        n.kind = r.kind;
        n.source = r.source;
        if (r.has_audio()) {
            auto w = normalize_waveform(r, o);
            if (!w.ok()) return w.status().with_context(what);
            n.audio = std::move(w).value();
        }
        if (r.kind == ReferenceKind::kImage) {
            auto size = reference_image_size(r.image.width, r.image.height, o.image_short_edge,
                                             o.spec.canvas_multiple());
            if (!size.ok()) return size.status().with_context(what);
            n.image = size->width == r.image.width && size->height == r.image.height
                          ? r.image
                          : pil_resize(r.image, size->width, size->height, ResampleFilter::kLanczos);
        } else if (r.kind == ReferenceKind::kVideo) {
            std::vector<int64_t> src = resample_to_24fps(r.frames.dim(0), r.fps);
            if (src.size() > static_cast<size_t>(o.num_frames)) src.resize(static_cast<size_t>(o.num_frames));
            if (src.empty()) return invalid_argument(what + ": no frame left after resampling to 24 fps");
            const int h = static_cast<int>(r.frames.dim(1)), w = static_cast<int>(r.frames.dim(2));
            // the target's canvas rule
            auto canvas = canvas_from_aspect(w, h, o.spec.canvas_multiple(), o.video_short_edge);
            if (!canvas.ok()) return canvas.status().with_context(what);
            const int64_t frame_bytes = static_cast<int64_t>(canvas->width) * canvas->height * 3;
            n.frames = Tensor::host(Shape{static_cast<int64_t>(src.size()), canvas->height, canvas->width, 3},
                                    DType::kU8);
            const bool same = canvas->width == w && canvas->height == h;
            // Consecutive duplicates of one source frame are resized once.
            io::RgbImage last;
            int64_t last_src = -1;
            for (size_t k = 0; k < src.size(); ++k) {
                if (src[k] != last_src) {
                    io::RgbImage f = frame_image(r.frames, src[k]);
                    last = same ? std::move(f)
                                : pil_resize(f, canvas->width, canvas->height, ResampleFilter::kLanczos);
                    last_src = src[k];
                }
                std::memcpy(n.frames.data_as<uint8_t>() + static_cast<int64_t>(k) * frame_bytes,
                            last.pixels.data(), static_cast<size_t>(frame_bytes));
            }
        }
        out.push_back(std::move(n));
    }
    return out;
}

} // namespace h3::pipeline
