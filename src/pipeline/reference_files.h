// Reading ref2va references from files (the CLI's `--reference`, the server's uploads): "image:PATH",
// "video:PATH", "audio:PATH", or a bare PATH whose kind comes from its content — an image by its magic bytes
// (PNG/JPEG/WebP), otherwise a media file FFmpeg opens: with a video stream it is a video reference (its
// soundtrack, when it has one, comes along), with only an audio stream an audio reference (WAV, MP3, AAC,
// FLAC, …). "audio:clip.mp4" takes a video file's soundtrack alone. A video's display-matrix rotation is
// undone (snapped to quarter turns), as diffusers' decode_reference_video does; pixel aspect ratios are not.
#pragma once

#include "core/status.h"
#include "io/image_reader.h"
#include "pipeline/references.h"

#include <optional>
#include <string>
#include <string_view>

namespace h3::pipeline {

// Splits "kind:path" (kind image|video|audio); any other text before a ':' is part of the path.
struct ReferenceSpec {
    std::optional<ReferenceKind> kind;
    std::string path;
    std::string name; // how errors and the reference's source name it (an upload's label); the path if empty
};
ReferenceSpec parse_reference_spec(const std::string& spec);

// Frames [F, H, W, 3] turned clockwise by `quarter_turns` × 90° (np.rot90(frames, k=−turns, axes=(1, 2))):
// a video whose display matrix rotates it counterclockwise by 90·t degrees is shown upright this way.
Tensor rotate_frames_clockwise(const Tensor& frames, int quarter_turns);

// What a reference may cost to read: decoding stops past `max_seconds` (the clip is then marked truncated;
// references are cut to the generated length, at most 15 s, so the default loses nothing that is used) and a
// video whose RGB frames would pass `max_video_bytes` is refused — so an upload cannot make the server decode
// an hour of 8K video.
struct ReferenceReadLimits {
    double max_seconds = 15.5;                    // the longest generated clip (15 s) plus a margin
    int64_t max_video_bytes = int64_t{4} << 30;   // 15 s of 1080p at 30 fps is ≈ 2.8 GiB
    int64_t max_audio_bytes = int64_t{1} << 30;   // 15.5 s of 8 channels at 192 kHz is ≈ 95 MiB
    int64_t max_frame_pixels = int64_t{40} << 20; // per video frame (8K UHD is 33 Mpx)
    io::ImageLimits image = {};                   // image references
};

// Errors name the file and what was wrong with it (unreadable, not an image or media file, the wrong kind,
// too large to decode).
Result<ReferenceMedia> read_reference(const ReferenceSpec& spec, const ReferenceReadLimits& limits = {});

// The same from uploaded bytes: images decode in memory; other media go through a fresh private temporary
// file (io/temp_file.h, removed before return) because FFmpeg's demuxers read files. `label` names the part
// in errors and becomes the reference's source (the temporary file's name never appears).
Result<ReferenceMedia> decode_reference(std::string_view bytes, const std::string& label,
                                        std::optional<ReferenceKind> kind = {},
                                        const ReferenceReadLimits& limits = {});

} // namespace h3::pipeline
