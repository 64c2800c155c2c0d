// The decode stage (spec §3 steps 8–9) over loaded decoders: video latents [1,C,T,h,w] → video VAE → RGB
// frames; audio latents [2,C_a,A] → audio VAE → stereo waveform at the VAE's rate; then the writers:
//   mp4      H.264 + AAC (frames required, the waveform muxed when given)
//   wav      the waveform
//   png_dir  a directory of PNG frames (+ audio.wav when a waveform is given)
// decode_to_file picks the writer from an output path (*.mp4, *.wav, anything else a PNG directory).
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "io/media_writer.h"
#include "model/audio_vae/audio_vae.h"
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

// What to write; empty paths are skipped.
struct MediaTargets {
    std::string mp4 = {}, wav = {}, png_dir = {};
    bool empty() const { return mp4.empty() && wav.empty() && png_dir.empty(); }
    bool needs_video() const { return !mp4.empty() || !png_dir.empty(); }
    bool needs_audio() const { return !wav.empty(); } // mp4 and png_dir take a waveform when there is one
};
// One output path by its extension.
MediaTargets media_targets_for(const std::string& output);

enum class DecodeStage { kVideo, kAudio, kWrite };

struct DecodeOptions {
    model::VideoDecodeOptions video;
    io::Mp4Options mp4;
    io::WavFormat wav = io::WavFormat::kPcm16;
    std::function<void(DecodeStage)> on_stage; // optional: called as each stage starts
    // Checked between stages and inside each (video decoder calls, audio decoder stages, every muxed frame):
    // once set, decode_to_file stops with kCancelled.
    const std::atomic<bool>* cancel = nullptr;
};

struct DecodeReport {
    int frames = 0, width = 0, height = 0;
    int64_t audio_samples = 0;
    int sample_rate = 0;
    double video_decode_seconds = 0.0, audio_decode_seconds = 0.0, write_seconds = 0.0;
};

// latents (normalized, host or device) → RGB8 frames [F, H, W, 3] on the host (options.group: on its rank 0;
// the other ranks get an undefined tensor): the model's entry itself — frames made on the decoder's device,
// downloaded as u8. A using-declaration, not a wrapper: a second function of the same signature would make
// every unqualified call with a model::VideoVae ambiguous (argument-dependent lookup finds both).
using model::decode_video_frames;
// latents [2, C_a, A] → waveform [2, A·hop] f32 on the host, in [−1, 1].
Result<Tensor> decode_audio_wave(const ops::Context& ctx, const model::AudioVae& vae, const Tensor& latents,
                                 const model::AudioVaeRunOptions& options = {});
// Writes frames [F, H, W, 3] u8 and/or a waveform [2, N] (undefined: none) to the targets; each target must
// be writable from what is given.
Status write_media(const MediaTargets& targets, const Tensor& frames, const Tensor& wave, int sample_rate,
                   const DecodeOptions& options = {});

// The loaded decoders a decode uses (null: that modality is not decoded).
struct Decoders {
    const model::VideoVae* video = nullptr;
    const model::AudioVae* audio = nullptr;
};

// Either latent tensor may be undefined (then that modality is skipped); the output kind must be writable
// from what is given, and the decoder of each given modality the output needs must be loaded.
Result<DecodeReport> decode_to_file(const ops::Context& ctx, const Decoders& decoders,
                                    const Tensor& video_latents, const Tensor& audio_latents,
                                    const std::string& output, const DecodeOptions& options = {});

// `video_latents` / `audio_latents` of a safetensors file (the `generate --save-latents` format); either may
// be missing (undefined), not both.
struct SavedLatents {
    Tensor video, audio;
};
Result<SavedLatents> read_latents_file(const std::string& path);

} // namespace h3::pipeline
