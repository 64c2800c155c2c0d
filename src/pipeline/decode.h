// The decode stage (spec §3 steps 8–9): video latents [1,24,T,h,w] → video VAE → RGB frames; audio latents
// [2,32,A] → audio VAE → stereo waveform at 32 kHz; then the writer chosen by the output path:
//   *.mp4  H.264 + AAC (video required, audio optional), *.wav  audio only (the video VAE is not run),
//   anything else  a directory of PNG frames (+ audio.wav when audio latents are given).
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "io/media_writer.h"
#include "model/video_vae/video_vae.h"
#include "ops/context.h"

#include <atomic>
#include <functional>
#include <string>

namespace h3::pipeline {

enum class OutputKind { kMp4, kWav, kPngDir };
OutputKind output_kind(const std::string& path);
// The kind of an output path, refusing what no writer handles: ".mp4", ".wav", or a directory for PNG frames
// (a path without an extension, or ending in '/'); anything else (".mkv", ".png", ...) is invalid_argument
// naming the allowed ones.
Result<OutputKind> checked_output_kind(const std::string& path);

enum class DecodeStage { kVideo, kAudio, kWrite };

struct DecodeOptions {
    model::VideoDecodeOptions video;
    io::Mp4Options mp4;
    io::WavFormat wav = io::WavFormat::kPcm16;
    // MP4 output only: also write the decoded waveform to this WAV (one audio decode, two files).
    std::string audio_wav;
    std::function<void(DecodeStage)> on_stage; // optional: called as each stage starts
    // Checked between stages and inside each (video decoder calls, audio decoder stages, every muxed frame):
    // once set, decode_to_file stops with kCancelled.
    const std::atomic<bool>* cancel = nullptr;
};

struct DecodeReport {
    OutputKind kind = OutputKind::kMp4;
    int frames = 0, width = 0, height = 0;
    int64_t audio_samples = 0;
    int sample_rate = 0;
    double video_decode_seconds = 0.0, audio_decode_seconds = 0.0, write_seconds = 0.0;
};

// `model_root` is a checkpoint root holding `vae/` and `audio_vae/` components (diffusers layout).
// Either latent tensor may be undefined (then that modality is skipped); the output kind must be writable
// from what is given.
Result<DecodeReport> decode_to_file(const ops::Context& ctx, const std::string& model_root,
                                    const Tensor& video_latents, const Tensor& audio_latents,
                                    const std::string& output, const DecodeOptions& options = {});

// Reads `video_latents` / `audio_latents` from a safetensors file (the `generate --save-latents` format).
Result<DecodeReport> decode_latents_file(const ops::Context& ctx, const std::string& model_root,
                                         const std::string& latents_path, const std::string& output,
                                         const DecodeOptions& options = {});

} // namespace h3::pipeline
