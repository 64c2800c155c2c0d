// h3-bench request --random-weights [--size WxH] [--frames F] [--steps N] [--seed N] [--prompt TEXT]
//                  [--configs official|CHECKPOINT] [--work DIR] [--output FILE] [--blocks B]
//                  [--device cuda] [--dtype bf16|fp32] [--precision bf16|fp8] [--vae-precision
//                  auto|exact|bf16|fp8]
//                  [--fasth3]
//                  [--attention dense|vsa[:...]] [--residency resident|layerwise]
//                  [--resident-blocks K] [--weight-dtype bf16|int8|auto] [--host-pinning on|off]
//                  [--gpu-memory-budget SIZE] [--warmup] [--keep-loaded] [--json]
// One whole t2va request through pipeline::Generator — the conditioner (tokenizer + language stack), the
// denoising loop on the DiT, the video and audio decoders, the MP4 mux — with every model made with random
// weights at the width its config gives (runtime::ComponentSupplier), so the request runs the production flow
// on a machine without the weights. The configs come from a configs-only checkpoint: `official` writes one
// into --work from the engine's built-in official configs (DiT, video VAE and audio VAE with unit latent
// normalization, Qwen3-VL text stack) with make-tiny's byte-level tokenizer (real vocabulary files are not
// needed for timing; the conditioning row count is reported); or any checkpoint's configs (e.g. a make-tiny
// one, for CPU tests). Reports the JobReport: stage seconds, per-step seconds, peak device memory, the
// conditioning rows, the files written (--json: one object). --fasth3 makes the DiT a FastH3 student (every
// block with its VSA compression gate) and writes FastVideo's sidecar beside the official configs, so the
// request takes the student's defaults through the job builder as a real FastH3 checkpoint does (4 forwards
// on the rung schedule, VSA 0.9) unless --steps / --attention say otherwise. The residency flags place the
// weights as `generate`'s do (the planner sizes the whole request under --gpu-memory-budget); the random
// DiT blocks and text layers are then made on the device one at a time and kept as host masters. --warmup
// runs Engine::warm_up with the request first (its conditioning and the DiT forwards that meet one-time
// work: GEMM timings, attention plans, the workspace the DiT keeps) and reports its seconds apart
// ("warmup"), so the request's first forward shows what a warmed server pays; without it the request pays
// that work itself (the metrics' work.first_forward says how much of each). --keep-loaded opens the engine
// as a server does (EngineOptions::keep_loaded: the DiT and the decoders stay loaded from the warm-up to the
// request, the text stack per job), so the request's stages carry no load of those; without it every
// component is loaded for the job that needs it, as `generate` does (here: made with random weights on the
// device).
#include "bench/commands.h"
#include "bench/synthetic_layout.h"
#include "core/cuda_api.h"
#include "engine/engine_impl.h"
#include "io/json_file.h"
#include "model/audio_vae/audio_vae.h"
#include "model/dit/dit_fp8.h"
#include "model/dit/dit_random.h"
#include "model/fasth3_contract.h"
#include "model/text/text_config.h"
#include "model/text/text_model.h"
#include "model/text/text_stack.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/tiny/tiny_text.h"
#include "model/video_vae/video_vae.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <unistd.h>

namespace fs = std::filesystem;

namespace h3::bench {

namespace {

constexpr const char* kDefaultPrompt =
    "A slow aerial shot over a coastal town at dusk: waves break on a rocky shore, gulls cry, street lamps "
    "flicker on one by one along the harbour while a fishing boat returns with its engine humming; the "
    "camera "
    "glides past whitewashed houses and a bell tower as the sky turns from orange to deep blue, and distant "
    "music drifts from an open window.";

nlohmann::json component_entry(const char* cls, const char* subfolder) {
    return nlohmann::json::array({"diffusers", cls, {{"subfolder", subfolder}}});
}

// A configs-only checkpoint of the engine's built-in official configs (diffusers layout).
Status write_official_configs(const fs::path& root) {
    std::error_code ec;
    for (const char* d : {"transformer", "vae", "audio_vae", "text_encoder", "tokenizer"}) {
        fs::create_directories(root / d, ec);
        if (ec) return io_error("bench request: cannot create " + (root / d).string() + ": " + ec.message());
    }
    nlohmann::json index = {{"_class_name", "MiniMaxH3ModularPipeline"}};
    index["transformer"] = component_entry("MiniMaxH3Transformer3DModel", "transformer");
    index["vae"] = component_entry("AutoencoderKLMiniMaxH3", "vae");
    index["audio_vae"] = component_entry("AutoencoderKLMiniMaxH3Audio", "audio_vae");
    index["text_encoder"] = component_entry("Qwen3VLForConditionalGeneration", "text_encoder");
    index["tokenizer"] = component_entry("Qwen2TokenizerFast", "tokenizer");
    H3_TRY(io::write_json_file((root / "model_index.json").string(), index));
    H3_TRY(io::write_json_file((root / "transformer" / "config.json").string(),
                               model::DitConfig{}.to_diffusers_json()));
    model::VideoVaeConfig vc; // official sizes; unit latent normalization (as bench vae)
    vc.latents_mean.assign(static_cast<size_t>(vc.latent_channels), 0.0f);
    vc.latents_std.assign(static_cast<size_t>(vc.latent_channels), 1.0f);
    H3_TRY(io::write_json_file((root / "vae" / "config.json").string(), vc.to_json()));
    model::AudioVaeConfig ac;
    ac.latents_mean.assign(static_cast<size_t>(ac.latent_channels), 0.0f);
    ac.latents_std.assign(static_cast<size_t>(ac.latent_channels), 1.0f);
    H3_TRY(io::write_json_file((root / "audio_vae" / "config.json").string(), ac.to_json()));
    H3_TRY(io::write_json_file((root / "text_encoder" / "config.json").string(),
                               model::TextConfig::official().to_json()));
    return model::write_tiny_tokenizer((root / "tokenizer").string());
}

fs::path component_dir(const std::string& root, const char* name) {
    return fs::path(root) / name;
}

// Random weights for every component a t2va request leases, at its config's width, made on the device.
runtime::ComponentSupplier random_components(int dit_blocks, bool gate_compress) {
    runtime::ComponentSupplier s;
    s.dit = [dit_blocks, gate_compress](const std::string& root, const runtime::ComponentPlacement& p,
                                        const ops::Context& ctx) -> Result<std::unique_ptr<model::DitModel>> {
        H3_ASSIGN_OR_RETURN(
            model::DitConfig cfg,
            model::DitConfig::from_file((component_dir(root, "transformer") / "config.json").string()));
        if (dit_blocks > 0) cfg.num_layers = std::min(dit_blocks, cfg.num_layers);
        const auto prec = p.precision == runtime::ComputePrecision::kFp32  ? model::DitPrecision::kFp32
                          : p.precision == runtime::ComputePrecision::kFp8 ? model::DitPrecision::kFp8
                                                                           : model::DitPrecision::kBf16;
        const bool streamed = !p.weights.plain();
        if (streamed && prec == model::DitPrecision::kFp8)
            return invalid_argument("bench request: --precision fp8 keeps its e4m3 block weights resident; "
                                    "drop it or the layerwise / int8 placement");
        H3_ASSIGN_OR_RETURN(auto w, model::random_dit_weights(cfg, ctx, prec,
                                                              {.adaln = true,
                                                               .gate_compress = gate_compress,
                                                               .seed = 11,
                                                               .host_blocks = streamed,
                                                               .pinned = p.weights.pin_host}));
        if (prec == model::DitPrecision::kFp8)
            H3_TRY(model::quantize_dit_fp8(ctx, cfg, {}, w)); // as load does
        std::unique_ptr<model::LayerWeightSource> source;
        if (streamed) {
            H3_ASSIGN_OR_RETURN(source, model::make_dit_block_source(w, prec, p.weights, ctx));
        }
        return std::make_unique<model::DitModel>(cfg, std::move(w), prec, ctx, std::move(source));
    };
    s.text_encoder = [](const std::string& root, const runtime::ComponentPlacement& p,
                        const ops::Context& ctx) -> Result<std::unique_ptr<model::TextStack>> {
        H3_ASSIGN_OR_RETURN(
            model::TextConfig cfg,
            model::TextConfig::from_file((component_dir(root, "text_encoder") / "config.json").string()));
        H3_ASSIGN_OR_RETURN(std::string tok_dir, model::find_tokenizer_dir(root));
        const auto prec = p.precision == runtime::ComputePrecision::kFp32 ? model::TextPrecision::kFp32
                                                                          : model::TextPrecision::kBf16;
        auto stack = std::make_unique<model::TextStack>();
        H3_ASSIGN_OR_RETURN(stack->tokenizer, model::tokenizer::Tokenizer::load(tok_dir));
        const bool streamed = !p.weights.plain();
        H3_ASSIGN_OR_RETURN(auto w, model::random_text_weights(cfg, cfg.used_layers(), prec, ctx, 1, streamed,
                                                               p.weights.pin_host));
        std::unique_ptr<model::LayerWeightSource> source;
        if (streamed) {
            H3_ASSIGN_OR_RETURN(source, model::make_text_layer_source(w, prec, p.weights, ctx));
        }
        stack->model = std::make_unique<model::TextModel>(cfg, std::move(w), prec, ctx, std::move(source));
        stack->dir = root;
        return stack;
    };
    s.video_decoder = [](const std::string& dir, const runtime::ComponentPlacement& p,
                         const ops::Context& ctx) -> Result<model::VideoVae> {
        H3_ASSIGN_OR_RETURN(model::VideoVaeConfig vc,
                            model::VideoVaeConfig::from_file((fs::path(dir) / "config.json").string()));
        // --vae-precision: the loader's block dtype (bf16 for bf16 and fp8), then fp8's e4m3 weights
        H3_ASSIGN_OR_RETURN(model::VideoVae vae,
                            model::random_video_vae(ctx, vc, runtime::video_decoder_compute(p), 1));
        if (runtime::video_vae_precision(p.precision) == model::VideoVaePrecision::kFp8)
            H3_TRY(model::quantize_video_vae_fp8(ctx, vae));
        return vae;
    };
    s.audio_decoder = [](const std::string& dir, const runtime::ComponentPlacement&,
                         const ops::Context& ctx) -> Result<model::AudioVae> {
        H3_ASSIGN_OR_RETURN(model::AudioVaeConfig ac,
                            model::AudioVaeConfig::from_file((fs::path(dir) / "config.json").string()));
        return model::random_audio_vae(ctx, ac, 1000);
    };
    return s;
}

} // namespace

Command request_command() {
    struct Options {
        std::string size = release_size(), device = "cuda", dtype = "bf16", prompt = kDefaultPrompt,
                    configs = "official", work, output, precision = "bf16", attention,
                    vae_precision = EngineOptions{}.vae_precision;
        int frames = kReleaseFrames, steps = 50, blocks = 0;
        uint64_t seed = 0;
        bool random_weights = false, json = false, fasth3 = false, warmup = false, keep_loaded = false;
        ResidencyFlags residency;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& bench) {
        o->sub = bench.add_subcommand(
            "request", "One whole t2va request through the Generator with random full-width weights");
        o->sub->add_flag("--random-weights", o->random_weights, "make every model with random weights");
        o->sub->add_option("--size", o->size, "canvas WxH")->capture_default_str();
        o->sub->add_option("--frames", o->frames, "pixel frames (snapped up to 17n+5)")
            ->capture_default_str();
        o->sub->add_option("--steps", o->steps, "sigma grid points (steps-1 forwards)")
            ->capture_default_str();
        o->sub->add_option("--seed", o->seed, "request seed")->capture_default_str();
        o->sub->add_option("--prompt", o->prompt, "prompt (default: a ~80-word scene description)");
        o->sub
            ->add_option("--configs", o->configs,
                         "official (the built-in configs, written to --work) or a checkpoint whose "
                         "configs to use (weights are not read)")
            ->capture_default_str();
        o->sub->add_option("--work", o->work, "folder for the configs and the output (default: a temp dir)");
        o->sub->add_option("--output", o->output, "media file to write (default: WORK/request.mp4)");
        o->sub->add_option("--blocks", o->blocks, "DiT blocks (default: the config's)");
        o->sub->add_option("--device", o->device, "cuda | cuda:N | cpu")->capture_default_str();
        o->sub->add_option("--dtype", o->dtype, "bf16 | fp32")
            ->check(CLI::IsMember({"bf16", "fp32"}))
            ->capture_default_str();
        o->sub->add_option("--precision", o->precision, "DiT precision with --dtype bf16: bf16 | fp8 (e4m3)")
            ->check(CLI::IsMember({"bf16", "fp8"}))
            ->capture_default_str();
        o->sub
            ->add_option("--vae-precision", o->vae_precision,
                         "video decoder: auto (fp8 under --precision fp8, else exact) | exact | bf16 (bf16 "
                         "blocks) | fp8 (e4m3 block GEMMs)")
            ->check(CLI::IsMember({"auto", "exact", "bf16", "fp8"}))
            ->capture_default_str();
        o->sub->add_flag("--fasth3", o->fasth3,
                         "a FastH3 student: compression gates in every block and the sidecar's defaults "
                         "(with --configs official)");
        o->sub->add_option("--attention", o->attention,
                           "dense | vsa[:sparsity=0.9,mode=exempt] (the job field)");
        add_residency_flags(o->sub, o->residency);
        o->sub->add_flag("--warmup", o->warmup,
                         "run the engine's warm-up for this request first (reported apart, as "
                         "\"warmup\")");
        o->sub->add_flag("--keep-loaded", o->keep_loaded,
                         "keep the DiT and the decoders loaded between the warm-up and the request, as a "
                         "server does (the text stack stays per job)");
        o->sub->add_flag("--json", o->json, "JSON output");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        if (!o->random_weights) {
            std::fprintf(stderr, "h3-bench request: only --random-weights is supported (real "
                                 "weights: use `generate --metrics`)\n");
            return kExitUsage;
        }
        fs::path work = o->work.empty()
                            ? fs::temp_directory_path() / ("h3-bench-request-" + std::to_string(::getpid()))
                            : fs::path(o->work);
        std::string root = o->configs;
        if (o->configs == "official") {
            root = (work / "configs").string();
            if (Status s = write_official_configs(root); !s.ok()) return report(s);
            if (o->fasth3) {
                Status s = io::write_json_file((fs::path(root) / model::kFastH3ContractFile).string(),
                                               model::fasth3_contract_json());
                if (!s.ok()) return report(s);
            }
        }
        const std::string output = o->output.empty() ? (work / "request.mp4").string() : o->output;
        std::error_code ec;
        fs::create_directories(fs::path(output).parent_path(), ec);

        pipeline::JobInput in;
        in.prompt = o->prompt;
        in.size = o->size;
        in.frames = o->frames;
        if (!o->fasth3 || o->sub->count("--steps")) in.num_inference_steps = o->steps; // else the sidecar's
        if (!o->attention.empty()) in.attention = o->attention;
        in.seed = o->seed;
        in.outputs.media = pipeline::media_targets_for(output);
        EngineOptions eo;
        eo.checkpoint = root;
        eo.device = o->device;
        eo.dtype = o->dtype;
        eo.precision = o->precision;
        eo.vae_precision = o->vae_precision;
        // the decoder's precision after "auto" (the CLI check admits only valid names)
        auto vae = video_vae_precision_of(eo);
        const std::string vae_precision = vae.ok() ? model::video_vae_precision_name(*vae) : o->vae_precision;
        const runtime::WeightPolicy wp = o->residency.policy();
        eo.residency = wp.residency;
        eo.resident_blocks = wp.resident_blocks;
        eo.weight_dtype = wp.weight_dtype;
        eo.host_pinning = wp.host_pinning;
        eo.gpu_memory_budget = wp.gpu_memory_budget;
        eo.int8_cache = wp.int8_cache;
        eo.max_steps = 1 << 20;
        eo.keep_loaded = o->keep_loaded;
        using runtime::Component;
        auto engine =
            Engine::Impl::open(eo, {.supplier = random_components(o->blocks, o->fasth3),
                                    .require = {Component::kTransformer, Component::kTextEncoder,
                                                Component::kVideoDecoder, Component::kAudioDecoder}});
        if (!engine.ok()) return report(engine.status());
        Engine::Impl& e = (*engine)->impl();
        pipeline::JobInput warm_in = in;
        auto job = e.build(std::move(in));
        if (!job.ok()) return report(job.status());
        pipeline::JobEvents events;
        events.progress = [](const pipeline::JobProgress& p) {
            if (p.stage == pipeline::Stage::kDenoise && p.step > 0)
                std::fprintf(stderr, "bench request: step %d/%d %.3f s\n", p.step, p.total, p.step_seconds);
        };
        nlohmann::json warmup = nullptr;
        if (o->warmup) {
            auto wjob = e.build_warm_up(std::move(warm_in));
            if (!wjob.ok()) return report(wjob.status());
            const auto tw = std::chrono::steady_clock::now();
            auto w = e.warm_up(*wjob, {});
            if (!w.ok()) return report(w.status());
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count();
            std::fprintf(stderr, "bench request: warm-up %.3f s (encode %.3f s, %zu forwards)\n", seconds,
                         w->encode_seconds, w->step_seconds.size());
            warmup = {{"seconds", seconds},
                      {"seconds_encode", w->encode_seconds},
                      {"step_seconds", w->step_seconds},
                      {"metrics", w->metrics(wjob->task)}};
        }
        std::fprintf(stderr, "bench request: %s, %d steps, %s %s\n", job->geometry.describe().c_str(),
                     job->steps, e.checkpoint().device.c_str(), e.checkpoint().dtype.c_str());
        reset_device_memory_peak();
        const auto t0 = std::chrono::steady_clock::now();
        auto r = e.run(*job, events);
        if (!r.ok()) return report(r.status());
        const std::string placement = e.weights_text; // the weights' placement the engine chose for the job
        std::fprintf(stderr, "bench request: %s\n", placement.c_str());
        const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        double step_sum = 0;
        for (double s : r->step_seconds) step_sum += s;
        nlohmann::json j = {
            {"bench", "request"},
            {"task", "t2va"},
            {"configs", o->configs},
            {"geometry", job->geometry.describe()},
            {"width", job->geometry.width},
            {"height", job->geometry.height},
            {"frames", job->geometry.frames},
            {"grid_points", job->steps},
            {"attention", job->attention.describe()},
            {"placement", placement},
            {"vae_precision", vae_precision},
            {"fasth3", o->fasth3},
            {"keep_loaded", o->keep_loaded},
            {"forwards", r->step_seconds.size()},
            {"conditioning_rows", r->conditioning_rows},
            {"seconds_total", total},
            {"seconds_encode", r->encode_seconds},
            {"seconds_denoise", r->denoise_seconds},
            {"seconds_denoise_setup", r->setup_seconds},
            {"seconds_per_step_mean", r->step_seconds.empty() ? 0.0 : step_sum / r->step_seconds.size()},
            {"seconds_decode", r->decode_seconds},
            {"seconds_mux", r->mux_seconds},
            {"step_seconds", r->step_seconds},
            {"peak_device_bytes", r->peak_device_bytes},
            {"peak_device_gib", static_cast<double>(r->peak_device_bytes) / (1ull << 30)},
            {"written", r->written},
            {"device", r->device},
            {"dtype", r->dtype},
            {"metrics", r->metrics(job->task)},
            {"warmup", warmup}};
        if (o->json) {
            std::printf("%s\n", j.dump(2).c_str());
        } else {
            std::printf(
                "request bench: %s, %d grid points, %lld conditioning rows on %s %s, video decoder %s\n",
                job->geometry.describe().c_str(), job->steps, static_cast<long long>(r->conditioning_rows),
                r->device.c_str(), r->dtype.c_str(), vae_precision.c_str());
            std::printf(
                "  encode %.2f s, denoise %.2f s (setup %.2f s, %zu forwards), decode %.2f s, mux %.2f "
                "s; total %.2f s; peak device %.2f GiB; wrote %s\n",
                r->encode_seconds, r->denoise_seconds, r->setup_seconds, r->step_seconds.size(),
                r->decode_seconds, r->mux_seconds, total,
                static_cast<double>(r->peak_device_bytes) / (1ull << 30), output.c_str());
            const pipeline::DenoiseParts& dp = r->denoise_parts;
            std::printf(
                "  denoise parts: noise+layout %.3f s, setup %.3f s, steps %.3f s, loop around the steps "
                "%.3f s, to host %.3f s, unpatchify %.3f s, around the call %.3f s\n",
                dp.noise_and_layout, dp.setup, dp.steps, dp.loop_outside_steps, dp.to_host, dp.unpatchify,
                dp.around(r->denoise_seconds));
            if (!warmup.is_null())
                std::printf("  warm-up before the request: %.2f s (encode %.2f s, %zu forwards)\n",
                            warmup["seconds"].get<double>(), warmup["seconds_encode"].get<double>(),
                            warmup["step_seconds"].size());
            const cache::WorkReport& w = r->work;
            if (!w.steps.empty()) {
                const OneTimeWork& f = w.steps.front().one_time;
                std::printf(
                    "  first forward's one-time work: %lld GEMM tunings (%.3f s), %lld attention plans "
                    "(%.3f s), %lld workspace allocations (%.1f MiB), %lld graph recordings (%.3f s)\n",
                    static_cast<long long>(f.gemm_tunings), f.gemm_tuning_seconds,
                    static_cast<long long>(f.attention_plans), f.attention_plan_seconds,
                    static_cast<long long>(f.workspace_allocations),
                    static_cast<double>(f.workspace_bytes) / (1 << 20),
                    static_cast<long long>(f.graph_recordings), f.graph_recording_seconds);
            }
        }
        return kExitOk;
    };
    return c;
}

} // namespace h3::bench
