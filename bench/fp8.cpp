// h3-bench fp8 --random-weights [--config official|CONFIG.json] [--size WxH] [--frames F] [--text L]
//              [--blocks N] [--attention dense|vsa[:sparsity=0.9,...]] [--device cuda] [--json]
// The fp8 precision's accuracy at full width: one DiT forward (refiner, N blocks, heads; random full-width
// weights and AdaLN tables made on the device, the synthetic t2va layout of --size/--frames) in bf16, then
// the same weights in fp8 with the default bf16 exceptions, with none (every block GEMM and attention in
// e4m3), and with the default exceptions and the other GEMM accumulation (DitFp8Options::fast_accum); the
// velocity (video `sample` and `audio_sample`) of each fp8 run against bf16 as cosine and relative
// RMS, and each forward's wall time. With --attention vsa:... every forward (bf16 too) runs VSA over the
// same tile map and sparsity (a FastH3 student: random compression gates in every block, e4m3 under fp8);
// each forward selects its tiles from its own scores, as a request does; a fourth fp8 forward keeps every
// gate in bf16 (what fp8 + VSA ran before the gates had e4m3 copies: the unfused quantization, one fallback
// noted). Each forward's kernel provenance (GEMM dtype, fused or unfused fp8 quantization, dense or sparse
// attention) and fallbacks are reported.
#include "bench/commands.h"
#include "bench/synthetic_layout.h"
#include "core/cuda_api.h"
#include "model/dit/dit_attention.h"
#include "model/dit/dit_fp8.h"
#include "model/dit/dit_random.h"
#include "ops/provenance.h"
#include "pipeline/provenance_json.h"

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

// "fused N, unfused M" from a forward's kernels (stage "job"), the fp8 quantization's calls.
std::string quantization_summary(const nlohmann::json& kernels) {
    const nlohmann::json q = kernels.value("/job/fp8_quantization"_json_pointer, nlohmann::json::object());
    std::string out;
    for (const auto& [impl, n] : q.items())
        out += (out.empty() ? "" : ", ") + impl + " " + std::to_string(n.get<int64_t>());
    return out.empty() ? "none" : out;
}

} // namespace

Command fp8_command() {
    struct Options {
        std::string size = release_size(), device = "cuda", config = "official", attention = "dense";
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
        o->sub->add_option("--config", o->config, "official or a transformer config.json")
            ->capture_default_str();
        o->sub
            ->add_option(
                "--attention", o->attention,
                "dense | vsa[:sparsity=0.9,mode=exempt|compete,...]: every forward's attention (vsa: "
                "random compression gates, e4m3 under fp8)")
            ->capture_default_str();
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
        model::DitConfig cfg; // the official config's defaults
        if (o->config != "official") {
            auto file = model::DitConfig::from_file(o->config);
            if (!file.ok()) return report(file.status());
            cfg = *file;
        }
        cfg.num_layers = std::max(1, std::min(o->blocks, cfg.num_layers));
        auto attention = model::parse_attention_choice(o->attention);
        if (!attention.ok()) return report(attention.status());
        model::DitForwardOptions fo;
        fo.attention = *attention;
        auto layout = synthetic_layout(o->size, o->frames, o->text);
        if (!layout.ok()) return report(layout.status());
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        const ops::Context& ctx = (*session)->context();
        reset_device_memory_peak();
        auto weights = model::random_dit_weights(
            cfg, ctx, model::DitPrecision::kBf16,
            {.blocks = cfg.num_layers, .adaln = false, .gate_compress = attention->is_vsa(), .seed = 1});
        if (!weights.ok()) return report(weights.status());
        const model::DitPackedInputs packed = model::synthetic_inputs(cfg, *layout, 0.3f, 0.55f, 2);
        auto tables = model::random_adaln_tables(cfg, ctx, DType::kBF16, packed.timesteps, cfg.num_layers, 3);
        if (!tables.ok()) return report(tables.status());
        // One forward; its kernel provenance ("kernels", "fallbacks") into `prov`.
        auto run = [&](const model::DitWeights& w, model::DitPrecision prec, double& secs,
                       nlohmann::json& prov) -> Result<model::DitOutputs> {
            ops::ProvenanceRecord record;
            const ops::ProvenanceScope scope(&record);
            model::DitModel m(cfg, w, prec, ctx);
            const auto t0 = Clock::now();
            auto r = m.forward(packed, &*tables, fo);
            if (r.ok()) H3_TRY((*session)->synchronize());
            secs = std::chrono::duration<double>(Clock::now() - t0).count();
            pipeline::add_provenance(prov, record);
            return r;
        };
        double bf16_s = 0;
        nlohmann::json bf16_prov;
        auto ref = run(*weights, model::DitPrecision::kBf16, bf16_s, bf16_prov);
        if (!ref.ok()) return report(ref.status());
        nlohmann::json j = {{"device", ctx.device.to_string()},
                            {"size", o->size},
                            {"frames", o->frames},
                            {"rows", packed.rows},
                            {"blocks", cfg.num_layers},
                            {"attention", attention->describe()},
                            {"bf16_forward_seconds", bf16_s},
                            {"bf16_kernels", bf16_prov["kernels"]}};
        if (!o->json)
            std::printf(
                "fp8 vs bf16, %s x %d frames, %lld rows, %d blocks, attention %s: bf16 forward %.2f s\n",
                o->size.c_str(), o->frames, static_cast<long long>(packed.rows), cfg.num_layers,
                attention->describe().c_str(), bf16_s);
        struct Variant {
            std::string name;
            std::vector<std::string> bf16_layers;
            bool fast_accum;
            std::string shown_layers = {}; // the text report's name for bf16_layers ("": the list)
        };
        const model::DitFp8Options defaults;
        std::vector<Variant> variants = {
            {"fp8 (default bf16 exceptions)", defaults.bf16_layers, defaults.fast_accum},
            {"fp8 (no exceptions)", {}, defaults.fast_accum},
            {defaults.fast_accum ? "fp8 (default exceptions, exact accumulation)"
                                 : "fp8 (default exceptions, fast accumulation)",
             defaults.bf16_layers, !defaults.fast_accum}};
        if (attention->is_vsa()) { // what fp8 + VSA ran before the gates had e4m3 copies
            Variant v{"fp8 (default exceptions, compression gates in bf16: unfused quantization)",
                      defaults.bf16_layers, defaults.fast_accum, "default + every block's to_gate_compress"};
            for (int b = 0; b < cfg.num_layers; ++b)
                v.bf16_layers.push_back("blocks." + std::to_string(b) + ".to_gate_compress");
            variants.push_back(std::move(v));
        }
        for (const Variant& v : variants) {
            model::DitWeights w = *weights; // shares the bf16 tensors
            Status st = model::quantize_dit_fp8(
                ctx, cfg, {.bf16_layers = v.bf16_layers, .fast_accum = v.fast_accum, .keep_bf16 = true}, w);
            if (!st.ok()) return report(st);
            double secs = 0;
            nlohmann::json prov;
            auto got = run(w, model::DitPrecision::kFp8, secs, prov);
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
                                     {"audio_rel_rms", b.rel_rms},
                                     {"kernels", prov["kernels"]},
                                     {"fallbacks", prov["fallbacks"]}});
            if (!o->json) {
                std::printf("  %s [%s]: forward %.2f s; velocity vs bf16: video cos %.6f rel-RMS %.4f, audio "
                            "cos %.6f rel-RMS %.4f; quantization %s\n",
                            v.name.c_str(), v.shown_layers.empty() ? layers.c_str() : v.shown_layers.c_str(),
                            secs, a.cosine, a.rel_rms, b.cosine, b.rel_rms,
                            quantization_summary(prov["kernels"]).c_str());
                for (const auto& f : prov["fallbacks"])
                    std::printf("    fallback %s: %s instead of %s: %s\n", f.value("family", "").c_str(),
                                f.value("used", "").c_str(), f.value("wanted", "").c_str(),
                                f.value("why", "").c_str());
            }
        }
        j["peak_device_gib"] = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
        if (o->json) std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    };
    return c;
}

} // namespace h3::bench
