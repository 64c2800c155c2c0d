#include "pipeline/decode.h"

#include "io/safetensors.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace fs = std::filesystem;

namespace h3::pipeline {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string lower_ext(const std::string& path) {
    std::string e = fs::path(path).extension().string();
    std::transform(e.begin(), e.end(), e.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return e;
}

} // namespace

OutputKind output_kind(const std::string& path) {
    const std::string e = lower_ext(path);
    if (e == ".mp4") return OutputKind::kMp4;
    if (e == ".wav") return OutputKind::kWav;
    return OutputKind::kPngDir;
}

Result<OutputKind> checked_output_kind(const std::string& path) {
    if (path.empty()) return invalid_argument("output path is empty");
    const OutputKind kind = output_kind(path);
    if (kind != OutputKind::kPngDir || path.back() == '/' || fs::path(path).extension().empty()) return kind;
    return invalid_argument("output '" + path + "': unknown extension '" +
                            fs::path(path).extension().string() +
                            "'; give .mp4 (video + audio), .wav (audio only) or a directory (PNG frames)");
}

MediaTargets media_targets_for(const std::string& output) {
    MediaTargets t;
    switch (output_kind(output)) {
    case OutputKind::kMp4:
        t.mp4 = output;
        break;
    case OutputKind::kWav:
        t.wav = output;
        break;
    case OutputKind::kPngDir:
        t.png_dir = output;
        break;
    }
    return t;
}

Result<Tensor> decode_audio_wave(const ops::Context& ctx, const model::AudioVae& vae, const Tensor& latents,
                                 const model::AudioVaeRunOptions& options) {
    return model::decode_audio(ctx, vae, latents, options);
}

Status write_media(const MediaTargets& t, const Tensor& frames, const Tensor& wave, int sample_rate,
                   const DecodeOptions& opt) {
    if (t.needs_video() && !frames.defined())
        return invalid_argument("decode: " + (t.mp4.empty() ? t.png_dir : t.mp4) + " needs video frames");
    if (t.needs_audio() && !wave.defined()) return invalid_argument("decode: " + t.wav + " needs audio");
    if (t.needs_video() && !io::media_available())
        return unimplemented("decode: this build has no FFmpeg, so only .wav output is possible");
    io::Mp4Options mp4_opt = opt.mp4;
    if (opt.cancel) mp4_opt.cancel = opt.cancel; // checked before every muxed frame
    if (!t.mp4.empty()) H3_TRY(io::write_mp4(t.mp4, frames, wave, sample_rate, mp4_opt));
    if (!t.wav.empty()) H3_TRY(io::write_wav(t.wav, wave, sample_rate, opt.wav));
    if (!t.png_dir.empty()) {
        H3_TRY(io::write_png_frames(t.png_dir, frames));
        if (wave.defined())
            H3_TRY(io::write_wav((fs::path(t.png_dir) / "audio.wav").string(), wave, sample_rate, opt.wav));
    }
    return ok_status();
}

Result<DecodeReport> decode_to_file(const ops::Context& ctx, const Decoders& decoders,
                                    const Tensor& video_latents, const Tensor& audio_latents,
                                    const std::string& output, const DecodeOptions& opt) {
    H3_TRY(checked_output_kind(output).status());
    const MediaTargets targets = media_targets_for(output);
    const bool want_video = targets.needs_video();
    const bool want_audio = audio_latents.defined();
    if (want_video && !video_latents.defined())
        return invalid_argument("decode: " + output + " needs video latents");
    if (targets.needs_audio() && !want_audio)
        return invalid_argument("decode: " + output + " needs audio latents");
    if (want_video && !io::media_available())
        return unimplemented("decode: this build has no FFmpeg, so only .wav output is possible");
    if (want_video && !decoders.video)
        return invalid_argument("decode: " + output + " needs the video decoder");
    if (want_audio && !decoders.audio)
        return invalid_argument("decode: " + output + " needs the audio decoder");
    const auto stage = [&](DecodeStage s) -> Status {
        if (opt.cancel && opt.cancel->load()) return cancelled("decode cancelled");
        if (opt.on_stage) opt.on_stage(s);
        return ok_status();
    };
    model::VideoDecodeOptions video_opt = opt.video;
    if (opt.cancel) video_opt.cancel = opt.cancel;
    DecodeReport rep;
    Tensor frames, wave;
    if (want_video) {
        H3_TRY(stage(DecodeStage::kVideo));
        const auto t0 = std::chrono::steady_clock::now();
        H3_ASSIGN_OR_RETURN(frames, decode_video_frames(ctx, *decoders.video, video_latents, video_opt));
        rep.video_decode_seconds = seconds_since(t0);
        rep.frames = static_cast<int>(frames.dim(0));
        rep.height = static_cast<int>(frames.dim(1));
        rep.width = static_cast<int>(frames.dim(2));
    }
    if (want_audio) {
        H3_TRY(stage(DecodeStage::kAudio));
        const auto t0 = std::chrono::steady_clock::now();
        H3_ASSIGN_OR_RETURN(wave,
                            decode_audio_wave(ctx, *decoders.audio, audio_latents, {.cancel = opt.cancel}));
        rep.audio_decode_seconds = seconds_since(t0);
        rep.audio_samples = wave.dim(1);
        rep.sample_rate = decoders.audio->config.sampling_rate;
    }
    H3_TRY(stage(DecodeStage::kWrite));
    const auto t0 = std::chrono::steady_clock::now();
    H3_TRY(write_media(targets, frames, wave, rep.sample_rate, opt));
    rep.write_seconds = seconds_since(t0);
    return rep;
}

Result<SavedLatents> read_latents_file(const std::string& path) {
    H3_ASSIGN_OR_RETURN(auto f, io::SafetensorsFile::open(path));
    SavedLatents out;
    if (f.contains("video_latents")) {
        H3_ASSIGN_OR_RETURN(out.video, f.tensor("video_latents"));
    }
    if (f.contains("audio_latents")) {
        H3_ASSIGN_OR_RETURN(out.audio, f.tensor("audio_latents"));
    }
    if (!out.video.defined() && !out.audio.defined())
        return bad_input("decode: " + path + " holds neither 'video_latents' nor 'audio_latents'");
    if (out.video.defined() && out.video.rank() != 5)
        return bad_input("decode: " + path + ": video_latents must be [1, C, T, h, w], got " +
                         out.video.describe());
    if (out.audio.defined() && out.audio.rank() != 3)
        return bad_input("decode: " + path + ": audio_latents must be [2, C_a, A], got " +
                         out.audio.describe());
    return out;
}

} // namespace h3::pipeline
