#include "pipeline/reference_files.h"

#include "io/image_reader.h"
#include "io/media_reader.h"
#include "io/media_writer.h"
#include "io/temp_file.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace h3::pipeline {

ReferenceSpec parse_reference_spec(const std::string& spec) {
    ReferenceSpec out;
    out.path = spec;
    const size_t colon = spec.find(':');
    if (colon == std::string::npos) return out;
    const std::string head = spec.substr(0, colon);
    for (ReferenceKind k : {ReferenceKind::kImage, ReferenceKind::kVideo, ReferenceKind::kAudio})
        if (head == reference_kind_name(k)) {
            out.kind = k;
            out.path = spec.substr(colon + 1);
        }
    return out;
}

namespace {

io::ImageFormat image_format_of(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    uint8_t head[32] = {};
    f.read(reinterpret_cast<char*>(head), sizeof(head));
    return io::detect_image_format(head, static_cast<size_t>(f.gcount()));
}

bool looks_like_image(const std::string& path) {
    return image_format_of(path) != io::ImageFormat::kUnknown;
}

// A reference whose kind was given as video or audio must not be an image: FFmpeg would open a PNG as a
// one-frame video and the mistake would surface only in the model, without the file's name.
Status check_given_kind(std::optional<ReferenceKind> kind, io::ImageFormat format, const std::string& name) {
    if (!kind || *kind == ReferenceKind::kImage || format == io::ImageFormat::kUnknown) return ok_status();
    return bad_input(name + ": is an image (" + io::image_format_name(format) + "), not " +
                     (*kind == ReferenceKind::kVideo ? "a video" : "audio") +
                     "; an image reference is read as an image");
}

bool looks_like_wav(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    char head[12] = {};
    f.read(head, sizeof(head));
    return f.gcount() == 12 && std::string(head, 4) == "RIFF" && std::string(head + 8, 4) == "WAVE";
}

} // namespace

Tensor rotate_frames_clockwise(const Tensor& frames, int quarter_turns) {
    const int t = ((quarter_turns % 4) + 4) % 4;
    const int64_t n = frames.dim(0), h = frames.dim(1), w = frames.dim(2);
    const bool swap = t % 2 == 1;
    Tensor out = Tensor::host(Shape{n, swap ? w : h, swap ? h : w, 3}, DType::kU8);
    const int64_t oh = out.dim(1), ow = out.dim(2);
    const uint8_t* src = frames.data_as<uint8_t>();
    uint8_t* dst = out.data_as<uint8_t>();
    for (int64_t f = 0; f < n; ++f)
        for (int64_t y = 0; y < oh; ++y)
            for (int64_t x = 0; x < ow; ++x) {
                int64_t sy = y, sx = x; // source pixel of out[y][x]
                if (t == 1) sy = h - 1 - x, sx = y;
                if (t == 2) sy = h - 1 - y, sx = w - 1 - x;
                if (t == 3) sy = x, sx = w - 1 - y;
                std::memcpy(dst + ((f * oh + y) * ow + x) * 3, src + ((f * h + sy) * w + sx) * 3, 3);
            }
    return out;
}

Result<ReferenceMedia> read_reference(const ReferenceSpec& spec, const ReferenceReadLimits& limits) {
    if (spec.path.empty()) return invalid_argument("reference: empty file name");
    const std::string& name = spec.name.empty() ? spec.path : spec.name;
    std::error_code ec;
    if (!std::filesystem::exists(spec.path, ec)) return not_found(name + " does not exist");
    if (!std::filesystem::is_regular_file(spec.path, ec)) return bad_input(name + " is not a regular file");
    H3_TRY(check_given_kind(spec.kind, image_format_of(spec.path), name));
    ReferenceMedia r;
    r.source = name;
    const bool image = spec.kind ? *spec.kind == ReferenceKind::kImage : looks_like_image(spec.path);
    if (image) {
        H3_ASSIGN_OR_RETURN(io::DecodedImage d, io::read_image(spec.path, limits.image, spec.name));
        r.kind = ReferenceKind::kImage;
        r.image = std::move(d.image);
        return r;
    }
    if (!io::media_available() && spec.kind != ReferenceKind::kVideo && looks_like_wav(spec.path)) {
        // a build without FFmpeg still reads WAV audio references
        auto w = io::read_wav(spec.path);
        if (!w.ok())
            return spec.name.empty() ? w.status() : Status(w.status().code(), name + ": not a readable WAV");
        r.kind = ReferenceKind::kAudio;
        r.audio = std::move(w->samples);
        r.sample_rate = w->sample_rate;
        return r;
    }
    io::MediaReadOptions mo;
    mo.video = spec.kind != ReferenceKind::kAudio;
    mo.audio = true;
    mo.max_seconds = limits.max_seconds;
    mo.max_video_bytes = limits.max_video_bytes;
    mo.max_audio_bytes = limits.max_audio_bytes;
    mo.max_frame_pixels = limits.max_frame_pixels;
    mo.name = name;
    auto media = io::read_media(spec.path, mo);
    if (!media.ok() && !spec.kind && media.status().message().find("no video stream") != std::string::npos) {
        mo.video = false; // a bare path without pictures: an audio reference
        media = io::read_media(spec.path, mo);
    }
    if (!media.ok()) return media.status();
    if (mo.video && media->frames.defined()) {
        r.kind = ReferenceKind::kVideo;
        // Python round() (half to even) of rotation/90, modulo 4 (non-negative)
        const int turns = ((static_cast<int>(std::nearbyint(media->rotation_degrees / 90.0)) % 4) + 4) % 4;
        r.frames = turns ? rotate_frames_clockwise(media->frames, turns) : std::move(media->frames);
        r.fps = media->fps;
    } else {
        r.kind = ReferenceKind::kAudio;
        if (!media->audio.defined())
            return invalid_argument(name + ": no audio stream (an audio reference needs one)");
    }
    if (media->audio.defined()) {
        r.audio = std::move(media->audio);
        r.sample_rate = media->sample_rate;
    }
    r.truncated = media->truncated;
    return r;
}

} // namespace h3::pipeline

namespace h3::pipeline {

Result<ReferenceMedia> decode_reference(std::string_view bytes, const std::string& label,
                                        std::optional<ReferenceKind> kind,
                                        const ReferenceReadLimits& limits) {
    if (bytes.empty()) return invalid_argument(label + ": empty upload");
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    H3_TRY(check_given_kind(kind, io::detect_image_format(data, bytes.size()), label));
    const bool image = kind ? *kind == ReferenceKind::kImage
                            : io::detect_image_format(data, bytes.size()) != io::ImageFormat::kUnknown;
    if (image) {
        auto d = io::decode_image(data, bytes.size(), label, limits.image);
        if (!d.ok()) return d.status();
        ReferenceMedia r;
        r.kind = ReferenceKind::kImage;
        r.source = label;
        r.image = std::move(d->image);
        return r;
    }
    auto tmp = io::TempFile::create("reference");
    if (!tmp.ok()) return io_error(label + ": cannot stage the upload: " + tmp.status().message());
    if (Status s = tmp->append(bytes.data(), bytes.size()); !s.ok())
        return io_error(label + ": cannot stage the upload: " + s.message());
    return read_reference({kind, tmp->path(), label}, limits);
}

} // namespace h3::pipeline
