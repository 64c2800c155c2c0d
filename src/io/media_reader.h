// Media input: any container FFmpeg demuxes (MP4, MKV, MOV, WebM, …) decoded in-process through
// libavformat/libavcodec, video converted to RGB24 by libswscale, audio to planar float by libswresample.
// Builds without FFmpeg (H3_WITH_FFMPEG undefined) return kUnimplemented with a clear message.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <cstdint>
#include <string>

namespace h3::io {

struct MediaReadOptions {
    bool video = true;       // decode the best video stream; a file without one is an error
    bool audio = true;       // decode the best audio stream when the file has one
    int64_t max_frames = -1; // stop after this many video frames (< 0: all)
    // Stop once the video (one frame past ceil(max_seconds·fps)) and the audio (one sample past
    // max_seconds·rate) are longer than this many seconds; MediaData::truncated says it happened (< 0: all).
    double max_seconds = -1;
    // Refuse (bad_input) a video whose decoded RGB frames would pass this many bytes (< 0: no cap).
    int64_t max_video_bytes = -1;
    // Refuse a video whose frames are larger than this many pixels, before decoding one (the declared size
    // is checked first; libavcodec is told the same cap). 8K UHD is 33 Mpx.
    int64_t max_frame_pixels = int64_t{40} << 20;
    // Refuse audio that decodes to more than this many bytes of float samples (< 0: no cap).
    int64_t max_audio_bytes = -1;
    // How errors name the input (an upload's label); the path when empty.
    std::string name;
};

struct MediaData {
    // [F, H, W, 3] u8 RGB, full range. YUV sources are converted with the matrix and range the stream
    // declares (BT.601 when it declares none). Undefined when MediaReadOptions::video is false.
    Tensor frames;
    double fps = 0.0; // average frame rate of the video stream (r_frame_rate when the average is unknown)
    int fps_num = 0, fps_den = 1;
    std::string video_codec; // FFmpeg decoder name, e.g. "h264"
    // Counterclockwise rotation in degrees from the stream's display matrix (0 without one). The frames are
    // as stored; a consumer that wants them upright turns them (pipeline/reference_files does).
    double rotation_degrees = 0.0;

    // [C, N] f32 at the stream's own rate and channel count. Undefined when the file has no audio stream
    // or MediaReadOptions::audio is false. Encoder priming is dropped the way FFmpeg's demuxer says to.
    Tensor audio;
    int sample_rate = 0;
    std::string audio_codec; // e.g. "aac"

    bool truncated = false; // MediaReadOptions::max_seconds stopped the decode before the end
};

// Errors name the file and what was wrong: missing or unreadable file (not_found / io_error), not a media
// file, no video stream, no decoder for the codec, a stream that does not decode (bad_input).
Result<MediaData> read_media(const std::string& path, const MediaReadOptions& options = {});

// The counterpart of write_mp4: every video frame and the audio track.
inline Result<MediaData> read_mp4(const std::string& path) {
    return read_media(path);
}

} // namespace h3::io
