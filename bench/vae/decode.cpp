// bench vae: the official video decoder over a full tiled decode (or --tiles N tile-clips, extrapolated to
// all of them) and the audio decoder, random weights generated on the device.
#include "bench/device_report.h"
#include "bench/roofline.h"
#include "bench/vae/options.h"
#include "core/cuda_api.h"
#include "model/audio_vae/audio_vae.h"
#include "model/video_vae/video_vae.h"
#include "model/video_vae/video_vae_cost.h"
#include "ops/ops.h"
#include "pipeline/provenance_json.h"
#include "pipeline/quality_metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

namespace h3::bench {

namespace {
using Clock = std::chrono::steady_clock;

// The decode's work (model::video_decode_cost), the rate achieved in `seconds` and the roofline bound at
// the given f16 peak (e4m3 GEMMs at twice it, as on an H100) and HBM bandwidth.
nlohmann::json decode_roofline(const model::VideoDecodeCost& cost, bool e4m3_gemms, double seconds,
                               double peak_tflops, double hbm_tb_per_s) {
    const double e4m3_flops = e4m3_gemms ? cost.block_gemm_flops : 0.0;
    const double f16_flops = cost.flops() - e4m3_flops;
    const RooflineBound b =
        roofline_bound(f16_flops, e4m3_flops, cost.bytes(), peak_tflops,
                       peak_tflops * (kH100DenseE4m3Tflops / kH100DenseF16Tflops), hbm_tb_per_s);
    return {{"tile_clips", cost.tile_clips},
            {"decoder_calls", cost.calls},
            {"token_rows", cost.rows},
            {"block_gemm_tflop", cost.block_gemm_flops / 1e12},
            {"other_gemm_tflop", cost.other_gemm_flops / 1e12},
            {"attention_tflop", cost.attention_flops / 1e12},
            {"total_tflop", cost.flops() / 1e12},
            {"weight_gb", cost.weight_bytes / 1e9},
            {"activation_gb", cost.activation_bytes / 1e9},
            {"achieved_tflops", seconds > 0 ? cost.flops() / seconds / 1e12 : 0.0},
            {"peak_f16_tflops", peak_tflops},
            {"block_gemms_e4m3", e4m3_gemms},
            {"hbm_tb_per_s", hbm_tb_per_s},
            {"compute_bound_seconds", b.compute_s},
            {"memory_bound_seconds", b.memory_s},
            {"lower_bound_seconds", b.seconds()},
            {"fraction_of_bound", seconds > 0 ? b.seconds() / seconds : 0.0}};
}

} // namespace

int run_vae_decode_bench(const VaeBenchOptions& o) {
    model::VideoVaeConfig vc;
    int W = 0, H = 0;
    if (Status s = vae_bench_setup(o, vc, W, H); !s.ok()) return report(s);
    if (o.frames < 5 || (o.frames - 5) % 17)
        return report(invalid_argument("--frames " + std::to_string(o.frames) + " must be 17n+5 (e.g. 124)"));
    if (o.sample && o.stream)
        return report(invalid_argument("--sample and --stream: give one (the fp32 sample is not streamed)"));
    auto precision = model::parse_video_vae_precision(o.vae_precision, "--vae-precision");
    if (!precision.ok()) return report(precision.status());
    const bool fp8 = *precision == model::VideoVaePrecision::kFp8;
    // exact: the --dtype blocks; bf16 and fp8: bf16 blocks (fp8's GEMM weights then e4m3)
    const auto compute = *precision == model::VideoVaePrecision::kExact ? parse_dtype(o.dtype)
                                                                        : std::optional<DType>(DType::kBF16);
    if (!compute) return report(invalid_argument("--dtype " + o.dtype + ": f16 | bf16 | f32"));
    const std::string block_dtype = *precision == model::VideoVaePrecision::kExact ? o.dtype : "bf16";
    if (o.psnr_vs_exact &&
        (*precision == model::VideoVaePrecision::kExact || o.tiles > 0 || o.sample || o.stream))
        return report(
            invalid_argument("--psnr-vs-exact compares the RGB8 frames of a --vae-precision bf16 or fp8 "
                             "decode with the exact decode's: not with exact, --tiles, --sample or "
                             "--stream"));
    auto session = DeviceSession::open(o.device);
    if (!session.ok()) return report(session.status());
    const ops::Context& ctx = (*session)->context();
    auto vae = model::random_video_vae(ctx, vc, *compute, 1);
    if (!vae.ok()) return report(vae.status());
    if (fp8)
        if (Status s = model::quantize_video_vae_fp8(ctx, *vae); !s.ok()) return report(s);
    const int64_t T = (o.frames - 5) / 17 * 5 + 2, lh = H / vc.patch, lw = W / vc.patch;
    const model::ClipPlan plan =
        model::plan_clips(static_cast<int>(T), vc.clip_length, vc.patch_t, vc.token_drop);
    model::VideoDecodeOptions vopt{.tile_batch = o.tile_batch, .assemble_on_host = o.assemble_on_host};
    int64_t streamed_frames = 0;
    if (o.stream) // a request's MP4 path: the frames handed over clip by clip (here counted, then dropped)
        vopt.frames_sink = [&](Tensor part) -> Status {
            streamed_frames += part.dim(0);
            return ok_status();
        };
    const auto ty = model::split_tiles(H, vopt.tile, vopt.min_overlap, vc.patch);
    const auto tx = model::split_tiles(W, vopt.tile, vopt.min_overlap, vc.patch);
    const int total_tiles = static_cast<int>(plan.starts.size() * ty.starts.size() * tx.starts.size());
    auto sync = [&] { return cuda::stream_synchronize(ctx.stream()); };
    double video_s = 0.0;
    nlohmann::json psnr_vs_exact = nullptr; // --psnr-vs-exact: the frames against the exact decode's
    int timed_tiles = total_tiles;
    // the kernels the video decode ran ("kernels" in the JSON: stage "warmup", then "decode" for the timed
    // part), e.g. the attention's sm90a-wgmma-bf16 or cudnn and the block GEMMs' dtype
    ops::ProvenanceRecord provenance;
    auto provenance_scope = std::make_unique<ops::ProvenanceScope>(&provenance);
    provenance.set_stage("warmup");
    // warm-up: one tile-clip batch of the size the decode uses (cuBLASLt / cuDNN plans, per-shape tables)
    const int batch =
        model::video_tile_batch(vopt, ctx.device, static_cast<int>(ty.starts.size() * tx.starts.size()));
    const int64_t th = std::min<int64_t>(lh, vopt.tile / vc.patch),
                  tw = std::min<int64_t>(lw, vopt.tile / vc.patch);
    std::vector<Tensor> zs;
    for (int b = 0; b < batch; ++b) {
        Tensor z = Tensor::host(Shape{vc.latent_channels, plan.clip_latents, th, tw}, DType::kF32);
        if (auto st = ops::fill_uniform(ops::Context::cpu(), {.seed = 7u + b}, z); !st.ok())
            return report(st);
        zs.push_back(z);
    }
    if (auto r = model::decode_tile_clips(ctx, *vae, zs); !r.ok()) return report(r.status());
    provenance.set_stage("decode");
    if (o.tiles > 0) {
        timed_tiles = std::min(o.tiles, total_tiles);
        const auto t0 = Clock::now();
        for (int done = 0; done < timed_tiles; done += batch) {
            std::vector<Tensor> part(zs.begin(), zs.begin() + std::min(batch, timed_tiles - done));
            if (auto r = model::decode_tile_clips(ctx, *vae, part); !r.ok()) return report(r.status());
        }
        if (auto st = sync(); !st.ok()) return report(st);
        video_s = std::chrono::duration<double>(Clock::now() - t0).count() * total_tiles / timed_tiles;
    } else {
        Tensor lat = Tensor::host(Shape{1, vc.latent_channels, T, lh, lw}, DType::kF32);
        if (auto st = ops::fill_uniform(ops::Context::cpu(), {.seed = 3}, lat); !st.ok()) return report(st);
        // what a request runs (latents -> u8 frames on the host), or with --sample the fp32 sample's path
        const auto t0 = Clock::now();
        auto decoded = o.sample ? model::decode_video_sample(ctx, *vae, lat, vopt)
                                : model::decode_video_frames(ctx, *vae, lat, vopt);
        if (!decoded.ok()) return report(decoded.status());
        if (o.stream && streamed_frames != o.frames)
            return report(internal_error("bench vae: the sink got " + std::to_string(streamed_frames) +
                                         " frames, not " + std::to_string(o.frames)));
        video_s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (o.psnr_vs_exact) { // the same latents through the exact decoder of the same random weights
            provenance.set_stage("exact");
            const DType exact_compute =
                model::video_vae_compute(model::VideoVaePrecision::kExact, ctx.device);
            auto exact = model::random_video_vae(ctx, vc, exact_compute, 1);
            if (!exact.ok()) return report(exact.status());
            auto want = model::decode_video_frames(ctx, *exact, lat, vopt);
            if (!want.ok()) return report(want.status());
            const double mse = pipeline::mse_u8(decoded->data_as<const uint8_t>(),
                                                want->data_as<const uint8_t>(), want->numel());
            psnr_vs_exact = {{"exact_dtype", dtype_name(exact_compute)},
                             {"mse", mse},
                             {"psnr_db", std::isfinite(pipeline::psnr_from_mse(mse))
                                             ? nlohmann::json(pipeline::psnr_from_mse(mse))
                                             : nlohmann::json("inf")}};
        }
    }
    provenance_scope.reset(); // the audio decoder's kernels are not the video decode's
    const double video_peak = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
    const model::VideoDecodeCost cost =
        model::video_decode_cost(vc, T, lh, lw, vopt, ctx.device, fp8 ? DType::kF8E4M3 : *compute);
    const nlohmann::json roofline = decode_roofline(cost, fp8, video_s, o.peak_tflops, o.hbm_tb_per_s);
    *vae = model::VideoVae{}; // free the video weights before the audio decoder
    model::AudioVaeConfig ac;
    ac.latents_mean.assign(static_cast<size_t>(ac.latent_channels), 0.0f);
    ac.latents_std.assign(static_cast<size_t>(ac.latent_channels), 1.0f);
    auto avae = model::random_audio_vae(ctx, ac, 1000);
    if (!avae.ok()) return report(avae.status());
    const int64_t A = (static_cast<int64_t>(o.frames) * 40 + 23) / 24; // 40 latents/s at 24 fps
    Tensor alat = Tensor::host(Shape{2, ac.latent_channels, A}, DType::kF32);
    if (auto st = ops::fill_uniform(ops::Context::cpu(), {.seed = 5}, alat); !st.ok()) return report(st);
    if (auto r = model::decode_audio(ctx, *avae, alat); !r.ok()) return report(r.status()); // warm-up
    const auto t1 = Clock::now();
    auto wave = model::decode_audio(ctx, *avae, alat);
    if (!wave.ok()) return report(wave.status());
    const double audio_s = std::chrono::duration<double>(Clock::now() - t1).count();
    const double peak = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
    // the decode's product: RGB8 frames on the host (a request's) or the fp32 sample (--sample); --tiles
    // times decoder calls only
    const char* video_output = o.sample ? "sample" : o.stream ? "rgb8-streamed" : "rgb8";
    nlohmann::json j = {{"bench", "vae"},
                        {"device", ctx.device.to_string()},
                        {"dtype", block_dtype},
                        {"vae_precision", o.vae_precision},
                        {"size", o.size},
                        {"frames", o.frames},
                        {"latent_frames", T},
                        {"tile_clips", total_tiles},
                        {"tile_clips_timed", timed_tiles},
                        {"tile_batch", batch},
                        {"extrapolated", timed_tiles != total_tiles},
                        {"assemble_on_host", o.assemble_on_host},
                        {"video_output", video_output},
                        {"gemm_autotune", gemm_autotune(ctx)},
                        {"video_decode_seconds", video_s},
                        {"seconds_per_tile_clip", video_s / total_tiles},
                        {"video_peak_gib", video_peak},
                        {"video_roofline", roofline},
                        {"psnr_vs_exact", psnr_vs_exact},
                        {"audio_latents", A},
                        {"audio_samples", wave->dim(1)},
                        {"audio_decode_seconds", audio_s},
                        {"peak_gib", peak}};
    pipeline::add_provenance(j, provenance);
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("VAE bench on %s, %s, %s x %d frames: video to %s %.2f s (%d tile-clips%s, %.4f s each), "
                    "audio %.3f s (%lld latents), peak %.1f GiB\n",
                    ctx.device.to_string().c_str(),
                    fp8 ? "fp8 (e4m3 block GEMMs)" : (o.vae_precision + " " + block_dtype).c_str(),
                    o.size.c_str(), o.frames,
                    o.sample   ? "fp32 sample"
                    : o.stream ? "RGB8 frames clip by clip"
                               : "RGB8 frames",
                    video_s, total_tiles, timed_tiles != total_tiles ? ", extrapolated" : "",
                    video_s / total_tiles, audio_s, static_cast<long long>(A), peak);
        std::printf(
            "  decoder work: %.1f TFLOP (block GEMMs %.1f, other GEMMs %.2f, attention %.1f) over %lld "
            "calls, %.1f GB of weights + %.1f GB in/out; achieved %.0f TFLOP/s; bound at %.0f "
            "TFLOP/s f16 and %.2f TB/s: %.2f s (compute %.2f s, memory %.3f s), %.0f %% of it\n",
            cost.flops() / 1e12, cost.block_gemm_flops / 1e12, cost.other_gemm_flops / 1e12,
            cost.attention_flops / 1e12, static_cast<long long>(cost.calls), cost.weight_bytes / 1e9,
            cost.activation_bytes / 1e9, roofline["achieved_tflops"].get<double>(), o.peak_tflops,
            o.hbm_tb_per_s, roofline["lower_bound_seconds"].get<double>(),
            roofline["compute_bound_seconds"].get<double>(), roofline["memory_bound_seconds"].get<double>(),
            100.0 * roofline["fraction_of_bound"].get<double>());
        if (!psnr_vs_exact.is_null())
            std::printf("  frames vs the exact decode (%s blocks, same weights and latents): PSNR %s dB\n",
                        psnr_vs_exact["exact_dtype"].get<std::string>().c_str(),
                        psnr_vs_exact["psnr_db"].dump().c_str());
    }
    return kExitOk;
}

} // namespace h3::bench
