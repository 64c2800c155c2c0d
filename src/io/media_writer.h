// Media output: MP4 (H.264 yuv420p + AAC, muxed in-process through libavformat/libavcodec/libswscale; whole,
// write_mp4, or frames as they come, Mp4Writer), WAV
// (PCM 16-bit or IEEE float, no FFmpeg needed) and PNG frame sequences (libavcodec's PNG encoder).
// Builds without FFmpeg (H3_WITH_FFMPEG undefined) return kUnimplemented for MP4/PNG with a clear message.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <atomic>
#include <memory>
#include <string>

namespace h3::io {

struct Mp4Options {
    int fps = 24;
    int crf = 12; // x264 constant rate factor: 12 is visually lossless for generated video
    // x264 preset. "veryfast" (issue #45; "medium" before): at crf 12 on a 1344x768 clip it encoded 2.3x
    // faster than "medium" into a 15 % smaller file of the same PSNR against the source (40.7 vs 40.6 dB);
    // on the demo model's 128x64 clip the same size at 44.9 vs 47.1 dB. The encoder then keeps pace with a
    // ~2 s decode (docs/benchmarks.md, "The mux"). Mp4Stream.PresetTable measures them all.
    std::string preset = "veryfast";
    int audio_bitrate = 192000; // AAC, bits/s
    // Checked before every video frame is encoded: once set, writing stops with kCancelled (the partial file
    // is the caller's to remove).
    const std::atomic<bool>* cancel = nullptr;
};

// An MP4 written as its frames come (the streams are declared up front, the audio muxed at the end):
//   auto w = Mp4Writer::open(path, {.width, .height, .audio_channels, .sample_rate}, options);
//   w->write_frames(chunk)...;  w->finish(audio);
// Frames are encoded in order; each chunk is [n, H, W, 3] host u8 of the declared size. Without finish()
// the file is left unfinished (no trailer: the caller removes it). Errors name the path. Not thread-safe:
// one thread drives a writer (pipeline/mp4_stream puts one on an encoder thread).
struct Mp4Streams {
    int width = 0, height = 0;               // even
    int audio_channels = 0, sample_rate = 0; // 1 or 2 channels at a positive rate; 0: no audio stream
};
class Mp4Writer {
public:
    static Result<std::unique_ptr<Mp4Writer>> open(const std::string& path, const Mp4Streams& streams,
                                                   const Mp4Options& options = {});
    ~Mp4Writer();
    Mp4Writer(const Mp4Writer&) = delete;
    Mp4Writer& operator=(const Mp4Writer&) = delete;

    Status write_frames(const Tensor& frames); // checks options.cancel before every batch of frames
    // audio: [C, N] f32 of the declared channels, or undefined when no audio stream was declared. Flushes
    // the video encoder, encodes the audio, writes the trailer.
    Status finish(const Tensor& audio);
    int64_t frames_written() const;
    const std::string& path() const;

    struct Impl;

private:
    explicit Mp4Writer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// frames: [F, H, W, 3] u8 RGB (H and W even). audio: [C, N] f32 in [−1, 1] (C = 1 or 2) or undefined (no
// audio stream). The audio is not trimmed to the video length (the reference does not trim either).
// Mp4Writer::open + write_frames(frames) + finish(audio).
Status write_mp4(const std::string& path, const Tensor& frames, const Tensor& audio, int sample_rate,
                 const Mp4Options& options = {});

enum class WavFormat { kPcm16, kFloat32 };
// audio [C, N] f32 -> interleaved WAV. PCM16: round(clamp(x, −1, 1)·32767).
Status write_wav(const std::string& path, const Tensor& audio, int sample_rate,
                 WavFormat format = WavFormat::kPcm16);
struct WavData {
    int sample_rate = 0;
    WavFormat format = WavFormat::kPcm16;
    Tensor samples; // [C, N] f32 (PCM16 read back as x / 32767)
    Tensor pcm16;   // [C, N] i16-valued f32 for PCM16 files (exact integers), undefined for float files
};
Result<WavData> read_wav(const std::string& path);

// frames [F, H, W, 3] u8 -> dir/frame_00000.png … (the directory is created).
Status write_png_frames(const std::string& dir, const Tensor& frames);

// True when this build can write MP4/PNG.
bool media_available();

} // namespace h3::io
