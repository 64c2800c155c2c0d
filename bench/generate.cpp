// h3-bench generate --random-weights [--size WxH] [--frames F] [--text L] [--steps N] [--blocks B]
//                   [--device cuda] [--dtype bf16|fp32] [--cache SPEC ...] [--json]
//                   [--attention dense|vsa[:...]] [--rungs 1000,750,500,250]
//                   [--residency resident|layerwise] [--resident-blocks K] [--weight-dtype
//                          bf16|int8|auto]
//                          [--host-pinning on|off] [--gpu-memory-budget SIZE]
// Runs the real sampling loop (layout, seeded noise, AdaLN tables for the whole schedule, request hoisting,
// N−1 DiT forwards, Euler updates) on a full-width DiT with random weights generated on the device, and
// reports setup and per-step seconds. This is the full-width random-weight generate run of the pipeline.
// With --cache, the same request runs lossless first and then once per cache spec (same weights, same
// noise), and each run's work counters are reported next to the lossless ones: DiT seconds against the
// fraction of blocks executed, and useful TFLOP/s against the lossless run's.
#include "pipeline/generate.h"
#include "bench/commands.h"
#include "bench/synthetic_layout.h"
#include "cache/cache_spec.h"
#include "core/cuda_api.h"
#include "model/dit/dit_random.h"
#include "ops/random.h"

#include "model/latent_spec.h"
#include "pipeline/geometry.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <memory>

namespace h3::bench {

Command generate_command() {
    struct Options {
        std::string size = release_size(), device = "cuda", dtype = "bf16";
        int frames = kReleaseFrames, text = kReleasePromptRows, steps = 4, blocks = 0;
        uint64_t seed = 0;
        bool random_weights = false, json = false;
        std::vector<std::string> caches;
        std::string attention = "dense";
        std::vector<int> rungs;
        ResidencyFlags residency;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& bench) {
        o->sub =
            bench.add_subcommand("generate", "The sampling loop on a full-width DiT with random weights");
        o->sub->add_flag("--random-weights", o->random_weights, "generate random weights on the device");
        o->sub->add_option("--size", o->size, "canvas WxH")->capture_default_str();
        o->sub->add_option("--frames", o->frames, "pixel frames")->capture_default_str();
        o->sub->add_option("--text", o->text, "conditioner rows")->capture_default_str();
        o->sub->add_option("--steps", o->steps, "grid points (steps−1 forwards)")->capture_default_str();
        o->sub->add_option("--blocks", o->blocks, "DiT blocks (default: all 50)");
        o->sub->add_option("--seed", o->seed, "noise seed")->capture_default_str();
        o->sub->add_option("--device", o->device, "cuda | cuda:N | cpu")->capture_default_str();
        o->sub->add_option("--dtype", o->dtype, "bf16 | fp32 | fp16")
            ->check(CLI::IsMember({"bf16", "fp32", "fp16"}))
            ->capture_default_str();
        add_residency_flags(o->sub, o->residency);
        o->sub->add_option("--cache", o->caches,
                           "step cache spec (as `generate --cache`) or quality preset name; repeatable. "
                           "Runs lossless first, then each spec, and compares the work counters");
        o->sub
            ->add_option("--attention", o->attention,
                         "dense | vsa[:sparsity=0.9,...] (VSA: a FastH3 student, compression gates included)")
            ->capture_default_str();
        o->sub
            ->add_option("--rungs", o->rungs, "a rung schedule instead of --steps (FastH3: 1000,750,500,250)")
            ->delimiter(',');
        o->sub->add_flag("--json", o->json, "JSON output");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        if (!o->random_weights) {
            std::fprintf(stderr, "h3-bench generate: only --random-weights is supported (real weights: use "
                                 "`generate`)\n");
            return kExitUsage;
        }
        int W = 0, H = 0;
        if (std::sscanf(o->size.c_str(), "%dx%d", &W, &H) != 2)
            return report(invalid_argument("--size '" + o->size + "' must be WxH"));
        if (o->text < 1) return report(invalid_argument("--text must be >= 1"));
        model::DitConfig cfg; // the official config
        if (o->blocks > 0) cfg.num_layers = std::min(o->blocks, cfg.num_layers);
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        const ops::Context& ctx = (*session)->context();
        const auto prec = *model::parse_precision(o->dtype, "--dtype");
        int W0 = 0, H0 = 0;
        std::sscanf(o->size.c_str(), "%dx%d", &W0, &H0);
        auto released = model::derive_latent_spec({.dit = &cfg, .dit_file = "the official DiT config"});
        if (!released.ok()) return report(released.status());
        auto geo = pipeline::resolve_geometry({.width = W0, .height = H0, .frames = o->frames}, *released);
        if (!geo.ok()) return report(geo.status());
        bool any_cache = false;
        for (const std::string& t : o->caches) any_cache = any_cache || (t != "lossless" && t != "none");
        const runtime::Workload wl =
            workload_for(geo->rows_per_frame() * geo->latent_frames, 2LL * geo->audio_latents, o->text,
                         o->steps, any_cache ? 4 : 0);
        auto choice = resolve_residency(o->residency, {runtime::dit_component_bytes(cfg, prec, wl)});
        if (!choice.ok()) return report(choice.status());
        if (!o->json) std::fprintf(stderr, "bench generate: %s\n", choice->describe().c_str());
        const bool streamed = !choice->dit.plain();
        reset_device_memory_peak();
        auto attention = model::parse_attention_choice(o->attention);
        if (!attention.ok()) return report(attention.status());
        auto weights = model::random_dit_weights(cfg, ctx, prec,
                                                 {.adaln = true,
                                                  .gate_compress = attention->is_vsa(),
                                                  .seed = 11,
                                                  .host_blocks = streamed,
                                                  .pinned = choice->dit.pin_host});
        if (!weights.ok()) return report(weights.status());
        std::unique_ptr<model::LayerWeightSource> source;
        if (streamed) {
            auto src = model::make_dit_block_source(*weights, prec, choice->dit, ctx);
            if (!src.ok()) return report(src.status());
            source = std::move(src).value();
        }
        model::DitModel dit(cfg, std::move(*weights), prec, ctx, std::move(source));
        pipeline::Conditioning cond;
        cond.embeddings = Tensor::host(Shape{o->text, cfg.text_dim}, DType::kF32);
        for (int64_t i = 0; i < cond.embeddings.numel(); ++i)
            cond.embeddings.data_as<float>()[i] = ops::uniform_value(5, static_cast<uint64_t>(i), 2.0f, 0.0f);
        cond.tags.assign(static_cast<size_t>(o->text), pipeline::kTagText);
        // Every spec is checked before the weights are made.
        std::vector<cache::CacheSpec> specs{cache::CacheSpec{}};
        for (const std::string& text : o->caches) {
            auto spec = text == "lossless" || text == "high" ? cache::quality_preset(text)
                                                             : cache::parse_cache_spec(text);
            if (!spec.ok()) return report(spec.status());
            specs.push_back(*spec);
        }
        pipeline::GenerationRequest req;
        { // the released VAEs' latent spec, with the bench DiT's channels
            auto spec = model::derive_latent_spec({.dit = &cfg, .dit_file = "the official DiT config"});
            if (!spec.ok()) return report(spec.status());
            auto g = pipeline::resolve_geometry({.width = W, .height = H, .frames = o->frames}, *spec);
            if (!g.ok()) return report(g.status());
            req.geometry = *g;
        }
        req.steps = o->rungs.empty() ? o->steps : static_cast<int>(o->rungs.size()) + 1;
        req.rungs = o->rungs;
        req.seed = o->seed;
        req.attention = *attention;
        nlohmann::json runs = nlohmann::json::array();
        bool all_finite = true;
        double lossless_dit_seconds = 0, lossless_tflops = 0;
        int64_t lossless_blocks = 0;
        for (const cache::CacheSpec& spec : specs) {
            req.cache = spec;
            reset_device_memory_peak();
            if (dit.block_source()) dit.block_source()->reset_counters();
            auto out = pipeline::generate_latents(dit, cond, req);
            if (!out.ok()) return report(out.status());
            double dit_seconds = 0;
            for (double s : out->step_seconds) dit_seconds += s;
            const double mean_step = dit_seconds / std::max<size_t>(1, out->step_seconds.size());
            auto finite = to_f32_vector(out->video_latents);
            bool run_finite = finite.ok();
            for (float v : *finite) run_finite = run_finite && std::isfinite(v);
            all_finite = all_finite && run_finite;
            const cache::WorkReport& w = out->work;
            nlohmann::json r = {
                {"cache", spec.describe()},
                {"forwards", out->step_seconds.size()},
                {"setup_seconds", out->setup_seconds},
                {"step_seconds", out->step_seconds},
                {"mean_step_seconds", mean_step},
                {"denoise_seconds", dit_seconds},
                {"dit_calls", w.dit_calls()},
                {"cache_hits", w.cache_hits()},
                {"blocks_executed", w.blocks_executed()},
                {"blocks_skipped", w.blocks_skipped()},
                {"useful_tflops_per_s", w.useful_tflops_per_s()},
                {"latents_finite", run_finite},
                {"peak_device_gib", static_cast<double>(device_memory_stats().peak) / (1ull << 30)},
                {"summary", w.summary()}};
            if (const model::LayerWeightSource* src = dit.block_source()) {
                const model::ResidencyStats& rs = src->stats();
                r["h2d_bytes"] = rs.h2d_bytes;
                r["h2d_gbps_during_denoise"] = dit_seconds > 0 ? rs.h2d_bytes / dit_seconds / 1e9 : 0.0;
                r["uploads"] = rs.uploads;
                r["sync_loads"] = rs.sync_loads;
                r["dropped_prefetches"] = rs.dropped_prefetches;
            }
            if (spec.kind == cache::CacheKind::kNone) {
                lossless_dit_seconds = dit_seconds;
                lossless_tflops = w.useful_tflops_per_s();
                lossless_blocks = w.blocks_executed();
            } else if (lossless_dit_seconds > 0 && lossless_blocks > 0) {
                // Time should fall with the executed blocks; useful throughput should hold.
                const double work_ratio = static_cast<double>(w.blocks_executed()) / lossless_blocks;
                r["blocks_executed_ratio"] = work_ratio;
                r["seconds_ratio"] = dit_seconds / lossless_dit_seconds;
                r["tflops_ratio"] = lossless_tflops > 0 ? w.useful_tflops_per_s() / lossless_tflops : 0.0;
            }
            if (!o->json)
                std::printf(
                    "generate bench [%s]: %zu forwards, %.2f s/step, denoise %.2f s, setup %.2f s; %s\n",
                    spec.describe().c_str(), out->step_seconds.size(), mean_step, dit_seconds,
                    out->setup_seconds, w.summary().c_str());
            if (runs.empty()) {
                r["video_latents_shape"] = out->video_latents.shape().to_vector();
                r["audio_latents_shape"] = out->audio_latents.shape().to_vector();
                r["frames"] = out->geometry.frames;
            }
            runs.push_back(std::move(r));
        }
        nlohmann::json j = runs[0];
        j["device"] = ctx.device.to_string();
        j["dtype"] = o->dtype;
        j["size"] = o->size;
        j["blocks"] = cfg.num_layers;
        j["steps"] = req.steps;
        j["attention"] = attention->describe();
        j["peak_device_gib"] = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
        j["residency"] = dit.residency_describe();
        j["plan"] = choice->describe();
        if (const model::LayerWeightSource* src = dit.block_source())
            j["weights_summary"] = src->stats().summary();
        if (runs.size() > 1) j["cached_runs"] = nlohmann::json(runs.begin() + 1, runs.end());
        if (o->json)
            std::printf("%s\n", j.dump(2).c_str());
        else
            std::printf("generate bench: peak %.1f GiB (last run), %s\n",
                        static_cast<double>(device_memory_stats().peak) / (1ull << 30),
                        dit.residency_describe().c_str());
        return all_finite ? kExitOk : kExitRuntime;
    };
    return c;
}

} // namespace h3::bench
