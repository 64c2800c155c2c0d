// h3-bench vae --config official --random-weights [--size WxH] [--frames F] [--tiles N] [--json]
// h3-bench vae --encode --random-weights [--size WxH] [--json]   (one keyframe through the encoder)
// h3-bench vae --reference --random-weights [--size WxH] [--frames F] [--json]   (ref2va encoders)
#include "bench/commands.h"
#include "bench/vae/options.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace h3::bench {

Command vae_command() {
    auto o = std::make_shared<VaeBenchOptions>();
    auto sub = std::make_shared<CLI::App*>(nullptr);
    Command c;
    c.setup = [o, sub](CLI::App& app) {
        CLI::App* vae =
            app.add_subcommand("vae", "video + audio VAE decoders with random full-width weights");
        *sub = vae;
        vae->add_option("--config", o->config, "official or a vae config.json")->capture_default_str();
        vae->add_flag("--random-weights", o->random_weights, "generate random weights on the device");
        vae->add_option("--size", o->size, "canvas WxH")->capture_default_str();
        vae->add_option("--frames", o->frames, "pixel frames (17n+5)")->capture_default_str();
        vae->add_option("--tiles", o->tiles, "time only N tile-clips and extrapolate (0: the full decode)")
            ->capture_default_str();
        vae->add_option("--tile-batch", o->tile_batch, "tile-clips per decoder call (0: default)")
            ->capture_default_str();
        vae->add_option("--dtype", o->dtype, "ViT block precision f16 | bf16 | f32")
            ->check(CLI::IsMember({"f16", "bf16", "f32"}))
            ->capture_default_str();
        vae->add_option(
               "--vae-precision", o->vae_precision,
               "video decoder: exact (--dtype blocks) | bf16 (bf16 blocks: GEMMs and attention) | fp8 "
               "(e4m3 block GEMMs, bf16 activations and attention); bf16 and fp8 ignore --dtype")
            ->check(CLI::IsMember({"exact", "bf16", "fp8"}))
            ->capture_default_str();
        vae->add_flag("--psnr-vs-exact", o->psnr_vs_exact,
                      "with --vae-precision bf16 or fp8: also decode the latents exactly (the same random "
                      "weights) and report the frames' PSNR against that decode (untimed)");
        vae->add_option("--device", o->device, "cuda | cuda:N | cpu")->capture_default_str();
        vae->add_flag("--encode", o->encode, "time the video encoder on one --size keyframe instead");
        vae->add_flag(
            "--reference", o->reference,
            "time the ref2va reference encoders instead: a --frames clip of --size (video encoder) and "
            "its stereo soundtrack (audio encoder)");
        vae->add_flag(
            "--exact-fp32", o->exact_fp32,
            "encoder convolutions in exact fp32 instead of TF32 tensor cores (--encode, --reference)");
        vae->add_flag(
            "--assemble-on-host", o->assemble_on_host,
            "stitch and cross-fade the decoded tiles on the host (the former path, for comparison)");
        vae->add_flag("--sample", o->sample,
                      "time the decode to the fp32 sample on the host (the former product, 4x the bytes "
                      "downloaded) instead of a request's RGB8 frames");
        vae->add_flag("--stream", o->stream,
                      "hand the RGB8 frames over clip by clip as a request's MP4 encoder gets them (the "
                      "double-buffered download) instead of whole");
        vae->add_option("--peak-tflops", o->peak_tflops,
                        "dense f16 tensor peak the decode's roofline bound uses (e4m3: twice it); default "
                        "H100 SXM")
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
        vae->add_option("--hbm-tb-per-s", o->hbm_tb_per_s,
                        "memory bandwidth the roofline bound uses (TB/s); default H100 SXM")
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
        vae->add_flag("--json", o->json, "JSON output");
    };
    c.parsed = [sub] { return *sub && (*sub)->parsed(); };
    c.run = [o]() -> int {
        if (!o->random_weights) {
            std::fprintf(stderr, "h3-bench vae: only --random-weights is supported (real weights: `h3-engine "
                                 "decode`)\n");
            return kExitUsage;
        }
        if (o->reference) return run_vae_reference_bench(*o);
        if (o->encode) return run_vae_encode_bench(*o);
        return run_vae_decode_bench(*o);
    };
    return c;
}

} // namespace h3::bench
