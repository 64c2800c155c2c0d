// Media output: MP4 (H.264 yuv420p + AAC, muxed in-process through libavformat/libavcodec/libswscale), WAV
// (PCM 16-bit or IEEE float, no FFmpeg needed) and PNG frame sequences (libavcodec's PNG encoder).
// Builds without FFmpeg (H3_WITH_FFMPEG undefined) return kUnimplemented for MP4/PNG with a clear message.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <atomic>
#include <string>

namespace h3::io {

struct Mp4Options {
    int fps = 24;
    int crf = 12;                  // x264 constant rate factor: 12 is visually lossless for generated video
    std::string preset = "medium"; // x264 preset
    int audio_bitrate = 192000;    // AAC, bits/s
    // Checked before every video frame is encoded: once set, writing stops with kCancelled (the partial file
    // is the caller's to remove).
    const std::atomic<bool>* cancel = nullptr;
};

// frames: [F, H, W, 3] u8 RGB (H and W even). audio: [C, N] f32 in [−1, 1] (C = 1 or 2) or undefined (no
// audio stream). The audio is not trimmed to the video length (the reference does not trim either).
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
