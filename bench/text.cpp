// h3-bench text --config official|CONFIG.json --random-weights [--tokens L] [--layers N]
//               [--device cuda] [--dtype bf16|fp32|fp16] [--iters K] [--json]
//               [--residency resident|layerwise] [--resident-blocks K] [--weight-dtype bf16|int8|auto]
//               [--host-pinning on|off] [--gpu-memory-budget SIZE]   (K: resident text layers)
// Times the conditioner's language stack (layers 0..N-1, default 50 of the 32 B Qwen3-VL) with random weights
// generated on the device: seconds per forward, useful TFLOP/s (GEMMs + causal attention), peak memory.
#include "bench/commands.h"
#include "core/cuda_api.h"
#include "model/text/text_model.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

namespace h3::bench {

Command text_command() {
    struct Options {
        std::string config = "official", device = "cuda", dtype = "bf16";
        int tokens = kReleasePromptRows, layers = -1, iters = 2;
        bool random_weights = false, json = false;
        ResidencyFlags residency;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& bench) {
        o->sub = bench.add_subcommand("text", "Text encoder (Qwen3-VL layers 0..49) with random weights");
        o->sub->add_option("--config", o->config, "official or a text_encoder config.json")
            ->capture_default_str();
        o->sub->add_flag("--random-weights", o->random_weights, "generate random weights on the device");
        o->sub->add_option("--tokens", o->tokens, "prompt tokens")->capture_default_str();
        o->sub->add_option("--layers", o->layers, "layers to run (default: min(50, config))");
        o->sub->add_option("--iters", o->iters, "timed forwards")->capture_default_str();
        o->sub->add_option("--device", o->device, "cuda | cuda:N | cpu")->capture_default_str();
        o->sub->add_option("--dtype", o->dtype, "bf16 | fp32 | fp16")
            ->check(CLI::IsMember({"bf16", "fp32", "fp16"}))
            ->capture_default_str();
        add_residency_flags(o->sub, o->residency);
        o->sub->add_flag("--json", o->json, "JSON output");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        using Clock = std::chrono::steady_clock;
        if (!o->random_weights) {
            std::fprintf(stderr, "h3-bench text: only --random-weights is supported (real weights: use "
                                 "`encode`)\n");
            return kExitUsage;
        }
        if (o->tokens < 1 || o->iters < 1)
            return report(invalid_argument("--tokens and --iters must be >= 1"));
        model::TextConfig cfg = model::TextConfig::official();
        if (o->config != "official") {
            auto r = model::TextConfig::from_file(o->config);
            if (!r.ok()) return report(r.status());
            cfg = *r;
        }
        const int layers = o->layers < 0 ? cfg.used_layers() : std::min(o->layers, cfg.num_hidden_layers);
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        const ops::Context& ctx = (*session)->context();
        const auto prec = *model::parse_precision(o->dtype, "--dtype");
        runtime::Workload wl;
        wl.text_rows = o->tokens;
        runtime::ComponentBytes tb = runtime::text_component_bytes(cfg, prec, layers, wl);
        tb.hot = true; // the flags place the text stack here
        auto choice = resolve_residency(o->residency, {tb});
        if (!choice.ok()) return report(choice.status());
        if (!o->json) std::fprintf(stderr, "bench text: %s\n", choice->describe().c_str());
        // The flags alone place the "DiT" slot (--resident-blocks K counts text layers here); a budget's plan
        // places the text stack by name.
        const model::ResidencyOptions& placed = choice->plan ? choice->text : choice->dit;
        const bool streamed = !placed.plain();
        reset_device_memory_peak();
        const auto tw = Clock::now();
        auto w = model::random_text_weights(cfg, layers, prec, ctx, 1, streamed, placed.pin_host);
        if (!w.ok()) return report(w.status());
        std::unique_ptr<model::LayerWeightSource> source;
        if (streamed) {
            auto src = model::make_text_layer_source(*w, prec, placed, ctx);
            if (!src.ok()) return report(src.status());
            source = std::move(src).value();
        }
        Status st = (*session)->synchronize();
        if (!st.ok()) return report(st);
        const double gen_s = std::chrono::duration<double>(Clock::now() - tw).count();
        const size_t weight_bytes = device_memory_stats().current;
        const int64_t rows = w->embed.dim(0);
        model::TextModel m(cfg, std::move(*w), prec, ctx, std::move(source));
        std::vector<int32_t> ids(static_cast<size_t>(o->tokens));
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 2654435761u) % rows);
        auto warm = m.forward(ids); // plans, heuristics
        if (!warm.ok()) return report(warm.status());
        st = (*session)->synchronize();
        if (!st.ok()) return report(st);
        const size_t setup_peak = device_memory_stats().peak;
        reset_device_memory_peak();
        if (m.layer_source()) m.layer_source()->reset_counters();
        const auto t0 = Clock::now();
        for (int i = 0; i < o->iters && st.ok(); ++i) {
            auto r = m.forward(ids);
            st = r.ok() ? (*session)->synchronize() : r.status();
        }
        if (!st.ok()) return report(st);
        const double secs = std::chrono::duration<double>(Clock::now() - t0).count() / o->iters;
        const double flops = model::TextModel::flops(cfg, layers, o->tokens);
        nlohmann::json j = {
            {"device", ctx.device.to_string()},
            {"dtype", o->dtype},
            {"tokens", o->tokens},
            {"layers", layers},
            {"hidden", cfg.hidden_size},
            {"iters", o->iters},
            {"seconds_per_forward", secs},
            {"seconds_per_layer", secs / layers},
            {"tflop_per_forward", flops / 1e12},
            {"useful_tflops", flops / secs / 1e12},
            {"weight_generation_seconds", gen_s},
            {"weights_bytes_on_device", weight_bytes},
            {"peak_device_gib", static_cast<double>(device_memory_stats().peak) / (1ull << 30)},
            {"setup_peak_device_gib", static_cast<double>(setup_peak) / (1ull << 30)},
            {"residency", m.residency_describe()},
            {"plan", choice->describe()}};
        if (const model::LayerWeightSource* src = m.layer_source()) {
            j["h2d_bytes_per_forward"] = static_cast<double>(src->stats().h2d_bytes) / o->iters;
            j["h2d_gbps_during_forward"] =
                static_cast<double>(src->stats().h2d_bytes) / o->iters / secs / 1e9;
            j["weights_summary"] = src->stats().summary();
        }
        if (o->json)
            std::printf("%s\n", j.dump(2).c_str());
        else
            std::printf("text bench on %s, %s, %d tokens, %d layers: %.4f s per forward, %.1f TFLOP/s, peak "
                        "%.1f GiB\n",
                        ctx.device.to_string().c_str(), o->dtype.c_str(), o->tokens, layers, secs,
                        flops / secs / 1e12, static_cast<double>(device_memory_stats().peak) / (1ull << 30));
        return kExitOk;
    };
    return c;
}

} // namespace h3::bench
