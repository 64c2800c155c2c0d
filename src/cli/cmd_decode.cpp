// h3-engine decode --model DIR --latents FILE --output out.mp4|out.wav|frames_dir [--device] [--crf N]
#include "cli/commands.h"
#include "cli/device_setup.h"
#include "pipeline/decode.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace h3::cli {

Command make_decode_command() {
    struct Options {
        std::string model, latents, output, device = "cpu", wav_format = "pcm16";
        int crf = 12;
        bool no_tiling = false;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand("decode",
                                    "Decode saved latents (generate --save-latents) to MP4, WAV or PNGs");
        o->sub->add_option("--model", o->model, "checkpoint root with vae/ and audio_vae/")->required();
        o->sub
            ->add_option("--latents", o->latents,
                         "safetensors with video_latents [1,24,T,h,w], audio_latents "
                         "[2,32,A]")
            ->required();
        o->sub
            ->add_option("--output", o->output,
                         "out.mp4 (H.264+AAC), out.wav (audio only) or a directory (PNGs)")
            ->required();
        o->sub->add_option("--device", o->device, "cpu | cuda | cuda:N")->capture_default_str();
        o->sub->add_option("--crf", o->crf, "H.264 quality (0 lossless .. 51; 12 visually lossless)")
            ->check(CLI::Range(0, 51))
            ->capture_default_str();
        o->sub->add_option("--wav-format", o->wav_format, "pcm16 | float")
            ->check(CLI::IsMember({"pcm16", "float"}))
            ->capture_default_str();
        o->sub->add_flag("--no-tiling", o->no_tiling,
                         "decode every clip whole (differs from the released recipe)");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        pipeline::DecodeOptions opt;
        opt.mp4.crf = o->crf;
        opt.video.tiling = !o->no_tiling;
        opt.wav = o->wav_format == "float" ? io::WavFormat::kFloat32 : io::WavFormat::kPcm16;
        auto r = pipeline::decode_latents_file((*session)->context(), o->model, o->latents, o->output, opt);
        if (!r.ok()) return report(r.status());
        std::fprintf(
            stderr,
            "decode: %d frames %dx%d, %lld audio samples at %d Hz; video %.3f s, audio %.3f s, write %.3f "
            "s -> %s\n",
            r->frames, r->width, r->height, static_cast<long long>(r->audio_samples), r->sample_rate,
            r->video_decode_seconds, r->audio_decode_seconds, r->write_seconds, o->output.c_str());
        return 0;
    };
    return c;
}

} // namespace h3::cli
