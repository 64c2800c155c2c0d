// h3-engine decode --model DIR --latents FILE --output out.mp4|out.wav|frames_dir [--device] [--crf N]
//                  [--vae-precision exact|bf16|fp8]
// The decoders come from a per-job runtime::ModelStore (only those the output needs are loaded).
#include "cli/commands.h"
#include "pipeline/decode.h"
#include "runtime/model_store.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace h3::cli {

Command make_decode_command() {
    struct Options {
        std::string model, latents, output, device = "cpu", wav_format = "pcm16", vae_precision = "exact";
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
                         "safetensors with video_latents [1,C,T,h,w], audio_latents "
                         "[2,C_a,A]")
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
        o->sub
            ->add_option("--vae-precision", o->vae_precision,
                         "video decoder precision: exact | bf16 (bf16 blocks) | fp8 (e4m3 block GEMMs); "
                         "bf16 and fp8 are lossy and faster")
            ->check(CLI::IsMember({"exact", "bf16", "fp8"}))
            ->capture_default_str();
        o->sub->add_flag("--no-tiling", o->no_tiling,
                         "decode every clip whole (differs from the released recipe)");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        auto device = parse_device(o->device);
        if (!device.ok()) return report(device.status().with_context("--device"));
        auto latents = pipeline::read_latents_file(o->latents);
        if (!latents.ok()) return report(latents.status());
        runtime::PlacementPlan plan = runtime::PlacementPlan::per_job(*device);
        auto vae_precision = model::parse_video_vae_precision(o->vae_precision);
        if (!vae_precision.ok()) return report(vae_precision.status());
        plan[runtime::Component::kVideoDecoder].precision = runtime::placement_precision(*vae_precision);
        auto store = runtime::ModelStore::open(o->model, plan);
        if (!store.ok()) return report(store.status());
        runtime::Lease<model::VideoVae> video;
        runtime::Lease<model::AudioVae> audio;
        if (pipeline::media_targets_for(o->output).needs_video() && latents->video.defined()) {
            auto l = (*store)->video_decoder();
            if (!l.ok()) return report(l.status());
            video = std::move(l).value();
        }
        if (latents->audio.defined()) {
            auto l = (*store)->audio_decoder();
            if (!l.ok()) return report(l.status());
            audio = std::move(l).value();
        }
        pipeline::DecodeOptions opt;
        opt.mp4.crf = o->crf;
        opt.video.tiling = !o->no_tiling;
        opt.wav = o->wav_format == "float" ? io::WavFormat::kFloat32 : io::WavFormat::kPcm16;
        auto r = pipeline::decode_to_file((*store)->context(), {.video = video.get(), .audio = audio.get()},
                                          latents->video, latents->audio, o->output, opt);
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
