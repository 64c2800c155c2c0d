#include "pipeline/decode.h"

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/audio_vae/audio_vae.h"

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

Result<std::string> component_dir(const std::string& root, const std::string& name) {
    H3_ASSIGN_OR_RETURN(auto ckpt, io::discover_checkpoint(root));
    const io::Component* c = ckpt.find(name);
    if (!c) return not_found("checkpoint " + root + " has no '" + name + "' component");
    if (!c->has_weights) return not_found("component '" + name + "' in " + root + " holds no safetensors");
    return c->dir;
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

Result<DecodeReport> decode_to_file(const ops::Context& ctx, const std::string& model_root,
                                    const Tensor& video_latents, const Tensor& audio_latents,
                                    const std::string& output, const DecodeOptions& opt) {
    DecodeReport rep;
    H3_ASSIGN_OR_RETURN(rep.kind, checked_output_kind(output));
    const bool want_video = rep.kind != OutputKind::kWav;
    const bool want_audio = audio_latents.defined();
    if (want_video && !video_latents.defined())
        return invalid_argument("decode: " + output + " needs video latents");
    if (rep.kind == OutputKind::kWav && !want_audio)
        return invalid_argument("decode: " + output + " needs audio latents");
    if (rep.kind != OutputKind::kWav && !io::media_available())
        return unimplemented("decode: this build has no FFmpeg, so only .wav output is possible");

    if (!opt.audio_wav.empty() && (rep.kind != OutputKind::kMp4 || !want_audio))
        return invalid_argument("decode: audio_wav is for MP4 output with audio latents");
    const auto stage = [&](DecodeStage s) -> Status {
        if (opt.cancel && opt.cancel->load()) return cancelled("decode cancelled");
        if (opt.on_stage) opt.on_stage(s);
        return ok_status();
    };
    model::VideoDecodeOptions video_opt = opt.video;
    if (opt.cancel) video_opt.cancel = opt.cancel;
    io::Mp4Options mp4_opt = opt.mp4;
    if (opt.cancel) mp4_opt.cancel = opt.cancel;
    Tensor frames, wave;
    if (want_video) {
        H3_TRY(stage(DecodeStage::kVideo));
        H3_ASSIGN_OR_RETURN(std::string dir, component_dir(model_root, "vae"));
        H3_ASSIGN_OR_RETURN(model::VideoVae vae, model::load_video_vae(dir, ctx.device));
        const auto t0 = std::chrono::steady_clock::now();
        H3_ASSIGN_OR_RETURN(Tensor sample, model::decode_video_sample(ctx, vae, video_latents, video_opt));
        rep.video_decode_seconds = seconds_since(t0);
        frames = model::sample_to_rgb8(sample);
        rep.frames = static_cast<int>(frames.dim(0));
        rep.height = static_cast<int>(frames.dim(1));
        rep.width = static_cast<int>(frames.dim(2));
    }
    if (want_audio) {
        H3_TRY(stage(DecodeStage::kAudio));
        H3_ASSIGN_OR_RETURN(std::string dir, component_dir(model_root, "audio_vae"));
        H3_ASSIGN_OR_RETURN(model::AudioVae vae, model::load_audio_vae(dir, ctx.device));
        const auto t0 = std::chrono::steady_clock::now();
        H3_ASSIGN_OR_RETURN(wave, model::decode_audio(ctx, vae, audio_latents, {.cancel = opt.cancel}));
        rep.audio_decode_seconds = seconds_since(t0);
        rep.audio_samples = wave.dim(1);
        rep.sample_rate = vae.config.sampling_rate;
    }
    H3_TRY(stage(DecodeStage::kWrite));
    const auto t0 = std::chrono::steady_clock::now();
    switch (rep.kind) {
    case OutputKind::kMp4:
        H3_TRY(io::write_mp4(output, frames, wave, rep.sample_rate, mp4_opt));
        if (!opt.audio_wav.empty()) H3_TRY(io::write_wav(opt.audio_wav, wave, rep.sample_rate, opt.wav));
        break;
    case OutputKind::kWav:
        H3_TRY(io::write_wav(output, wave, rep.sample_rate, opt.wav));
        break;
    case OutputKind::kPngDir:
        H3_TRY(io::write_png_frames(output, frames));
        if (wave.defined())
            H3_TRY(io::write_wav((fs::path(output) / "audio.wav").string(), wave, rep.sample_rate, opt.wav));
        break;
    }
    rep.write_seconds = seconds_since(t0);
    return rep;
}

Result<DecodeReport> decode_latents_file(const ops::Context& ctx, const std::string& model_root,
                                         const std::string& latents_path, const std::string& output,
                                         const DecodeOptions& opt) {
    H3_ASSIGN_OR_RETURN(auto f, io::SafetensorsFile::open(latents_path));
    Tensor video, audio;
    if (f.contains("video_latents")) {
        H3_ASSIGN_OR_RETURN(video, f.tensor("video_latents"));
    }
    if (f.contains("audio_latents")) {
        H3_ASSIGN_OR_RETURN(audio, f.tensor("audio_latents"));
    }
    if (!video.defined() && !audio.defined())
        return bad_input("decode: " + latents_path + " holds neither 'video_latents' nor 'audio_latents'");
    if (video.defined() && video.rank() != 5)
        return bad_input("decode: " + latents_path + ": video_latents must be [1, 24, T, h, w], got " +
                         video.describe());
    if (audio.defined() && audio.rank() != 3)
        return bad_input("decode: " + latents_path + ": audio_latents must be [2, 32, A], got " +
                         audio.describe());
    return decode_to_file(ctx, model_root, video, audio, output, opt);
}

} // namespace h3::pipeline
