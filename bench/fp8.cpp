// h3-bench fp8 --random-weights [--size WxH] [--frames F] [--text L] [--blocks N] [--device cuda]
//              [--json]
// The fp8 precision's accuracy at full width: one DiT forward (refiner, N blocks, heads; random full-width
// weights and AdaLN tables made on the device, the synthetic t2va layout of --size/--frames) in bf16, then
// the same weights in fp8 with the default bf16 exceptions, with none (every block GEMM and attention in
// e4m3), and with the default exceptions and the other GEMM accumulation (DitFp8Options::fast_accum); the
// velocity (video `sample` and `audio_sample`) of each fp8 run against bf16 as cosine and relative
// RMS, and each forward's wall time.
#include "bench/commands.h"
#include "bench/synthetic_layout.h"
#include "core/cuda_api.h"
#include "model/dit/dit_fp8.h"
#include "model/dit/dit_random.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

namespace h3::bench {

namespace {

struct Agreement {
    double cosine = 0, rel_rms = 0;
};

Agreement agree(const Tensor& got, const Tensor& want) {
    const float* g = got.data_as<const float>();
    const float* w = want.data_as<const float>();
    double gw = 0, gg = 0, ww = 0, dd = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
        gw += static_cast<double>(g[i]) * w[i];
        gg += static_cast<double>(g[i]) * g[i];
        ww += static_cast<double>(w[i]) * w[i];
        dd += (static_cast<double>(g[i]) - w[i]) * (static_cast<double>(g[i]) - w[i]);
    }
    return {gw / std::sqrt(std::max(gg * ww, 1e-300)), std::sqrt(dd / std::max(ww, 1e-300))};
}

} // namespace

Command fp8_command() {
    struct Options {
        std::string size = release_size(), device = "cuda";
        int frames = kReleaseFrames, text = kReleasePromptRows, blocks = 50;
        bool random_weights = false, json = false;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& bench) {
        o->sub = bench.add_subcommand(
            "fp8", "fp8 vs bf16 velocity after one full-width DiT forward (random weights)");
        o->sub->add_flag("--random-weights", o->random_weights, "generate random weights on the device");
        o->sub->add_option("--size", o->size, "canvas WxH")->capture_default_str();
        o->sub->add_option("--frames", o->frames, "pixel frames (17n+5)")->capture_default_str();
        o->sub->add_option("--text", o->text, "conditioner rows")->capture_default_str();
        o->sub->add_option("--blocks", o->blocks, "transformer blocks")->capture_default_str();
        o->sub->add_option("--device", o->device, "cuda | cuda:N | cpu")->capture_default_str();
        o->sub->add_flag("--json", o->json, "JSON output");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        using Clock = std::chrono::steady_clock;
        if (!o->random_weights) {
            std::fprintf(stderr, "h3-bench fp8: only --random-weights is supported\n");
            return kExitUsage;
        }
        model::DitConfig cfg;
        cfg.num_layers = std::max(1, std::min(o->blocks, cfg.num_layers));
        auto layout = synthetic_layout(o->size, o->frames, o->text);
        if (!layout.ok()) return report(layout.status());
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        const ops::Context& ctx = (*session)->context();
        reset_device_memory_peak();
        auto weights = model::random_dit_weights(cfg, ctx, model::DitPrecision::kBf16,
                                                 {.blocks = cfg.num_layers, .adaln = false, .seed = 1});
        if (!weights.ok()) return report(weights.status());
        const model::DitPackedInputs packed = model::synthetic_inputs(cfg, *layout, 0.3f, 0.55f, 2);
        auto tables = model::random_adaln_tables(cfg, ctx, DType::kBF16, packed.timesteps, cfg.num_layers, 3);
        if (!tables.ok()) return report(tables.status());
        auto run = [&](const model::DitWeights& w, model::DitPrecision prec,
                       double& secs) -> Result<model::DitOutputs> {
            model::DitModel m(cfg, w, prec, ctx);
            const auto t0 = Clock::now();
            auto r = m.forward(packed, &*tables);
            if (r.ok()) H3_TRY((*session)->synchronize());
            secs = std::chrono::duration<double>(Clock::now() - t0).count();
            return r;
        };
        double bf16_s = 0;
        auto ref = run(*weights, model::DitPrecision::kBf16, bf16_s);
        if (!ref.ok()) return report(ref.status());
        nlohmann::json j = {{"device", ctx.device.to_string()},
                            {"size", o->size},
                            {"frames", o->frames},
                            {"rows", packed.rows},
                            {"blocks", cfg.num_layers},
                            {"bf16_forward_seconds", bf16_s}};
        if (!o->json)
            std::printf("fp8 vs bf16, %s x %d frames, %lld rows, %d blocks: bf16 forward %.2f s\n",
                        o->size.c_str(), o->frames, static_cast<long long>(packed.rows), cfg.num_layers,
                        bf16_s);
        struct Variant {
            const char* name;
            std::vector<std::string> bf16_layers;
            bool fast_accum;
        };
        const model::DitFp8Options defaults;
        const Variant variants[] = {
            {"fp8 (default bf16 exceptions)", defaults.bf16_layers, defaults.fast_accum},
            {"fp8 (no exceptions)", {}, defaults.fast_accum},
            {defaults.fast_accum ? "fp8 (default exceptions, exact accumulation)"
                                 : "fp8 (default exceptions, fast accumulation)",
             defaults.bf16_layers, !defaults.fast_accum}};
        for (const Variant& v : variants) {
            model::DitWeights w = *weights; // shares the bf16 tensors
            Status st = model::quantize_dit_fp8(
                ctx, cfg, {.bf16_layers = v.bf16_layers, .fast_accum = v.fast_accum, .keep_bf16 = true}, w);
            if (!st.ok()) return report(st);
            double secs = 0;
            auto got = run(w, model::DitPrecision::kFp8, secs);
            if (!got.ok()) return report(got.status());
            const Agreement a = agree(got->sample, ref->sample),
                            b = agree(got->audio_sample, ref->audio_sample);
            std::string layers;
            for (const auto& l : v.bf16_layers) layers += (layers.empty() ? "" : ",") + l;
            j["variants"].push_back({{"name", v.name},
                                     {"bf16_layers", layers},
                                     {"fast_accum", v.fast_accum},
                                     {"forward_seconds", secs},
                                     {"video_cosine", a.cosine},
                                     {"video_rel_rms", a.rel_rms},
                                     {"audio_cosine", b.cosine},
                                     {"audio_rel_rms", b.rel_rms}});
            if (!o->json)
                std::printf("  %s [%s]: forward %.2f s; velocity vs bf16: video cos %.6f rel-RMS %.4f, audio "
                            "cos %.6f "
                            "rel-RMS %.4f\n",
                            v.name, layers.c_str(), secs, a.cosine, a.rel_rms, b.cosine, b.rel_rms);
        }
        j["peak_device_gib"] = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
        if (o->json) std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    };
    return c;
}

} // namespace h3::bench
