// h3-engine generate [--model DIR] (--prompt TEXT | --prompt-embeds FILE | --random-prompt-embeds L)
//   (no --model: the embedded tiny demo model, models/h3-demo, at its native size; not MiniMax-H3)
//   [--seconds S | --frames F] [--size WxH | --aspect W:H] [--steps N] [--seed N] [--device cpu|cuda]
//   [--dtype bf16|fp32] [--precision bf16|fp8] [--save-latents FILE] [--output PATH]
//   [--progress bar|json|none]
//   [--cache SPEC | --quality lossless|high] [--metrics FILE] [--first-frame IMG] [--last-frame IMG]
//   [--reference [image:|video:|audio:]FILE ...] [--attention dense|vsa[:sparsity=0.9,mode=exempt]]
//   [--lora FILE[:SCALE] ...] [--lora-mode merged|runtime] [--lora-strict] [--preset NAME]
//   [--video-shift S] [--audio-shift S]
//   [--dtype fp16] [--residency resident|layerwise]
//   [--resident-blocks K] [--weight-dtype bf16|int8|auto] [--host-pinning on|off] [--gpu-memory-budget SIZE]
//   [--int8-cache DIR]
// A translator onto h3::Engine (include/h3/engine.h): the flag families become EngineOptions, the job flags a
// JobRequest (checked before the checkpoint is opened), the engine builds and runs it (per-job placement,
// re-planned for the job under --gpu-memory-budget); errors name the flag of the field they are about.
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/demo_model.h"
#include "cli/engine_flags.h"
#include "cli/field_flags.h"
#include "cli/parallel_flags.h"
#include "cli/progress_printer.h"
#include "cli/reference_options.h"
#include "cli/spawn_ranks.h"
#include "cli/vsa_flags.h"
#include "engine/engine_impl.h"
#include "io/json_file.h"
#include "io/output_path.h"
#include "pipeline/cost_estimate.h"
#include "pipeline/decode.h"
#include "pipeline/job_builder.h"
#include "runtime/checkpoint_defaults.h"
#include "runtime/launcher.h"

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <unistd.h>

namespace h3::cli {

namespace {

std::atomic<bool> g_cancel{false};

void on_sigint(int) {
    g_cancel.store(true);
}

// Installs the Ctrl-C handler for the duration of a generation and restores the previous one.
class SigintScope {
public:
    SigintScope() {
        g_cancel = false;
        struct sigaction sa {};
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_);
    }
    ~SigintScope() { sigaction(SIGINT, &old_, nullptr); }

private:
    struct sigaction old_ {};
};

} // namespace

Command make_generate_command() {
    struct Options {
        std::string prompt, prompt_embeds, size, aspect, save_latents, output, progress, cache, quality,
            metrics;
        std::string attention; // FastH3 (cli/vsa_flags.h)
        int random_prompt_embeds = 0, steps = 50, frames = 0;
        double seconds = 0;
        uint64_t seed = 0;
        std::string first_frame, last_frame; // fl2va keyframes
        std::vector<std::string> references; // ref2va, in order
        int reference_image_edge = pipeline::JobBuilderOptions{}.reference_image_edge,
            reference_video_edge = EngineOptions{}.reference_video_edge;
        ModelFlags model;
        AdapterCliOptions adapters; // --lora*, --preset, --video-shift, --audio-shift
        ResidencyFlags residency;
        ParallelFlags parallel;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand(
            "generate",
            "Generate video+audio from a prompt (t2va), with keyframes (fl2va) or with references (ref2va)");
        CLI::App* sub = o->sub;
        add_model_flags(sub, o->model,
                        {.model_help =
                             "checkpoint root or transformer folder (default: the embedded tiny demo "
                             "model, not MiniMax-H3)"});
        CLI::App* job = sub->add_option_group("Request", "what to generate");
        auto* prompt = job->add_option("--prompt", o->prompt, "prompt text (needs the text encoder)");
        auto* embeds =
            job->add_option("--prompt-embeds", o->prompt_embeds,
                            "safetensors of precomputed conditioner rows prompt_embeds [L, text_dim]");
        auto* rnd = job->add_option("--random-prompt-embeds", o->random_prompt_embeds,
                                    "L random (seeded) conditioner rows instead of a prompt (testing)");
        prompt->excludes(embeds)->excludes(rnd);
        embeds->excludes(rnd);
        auto* secs =
            job->add_option("--seconds", o->seconds, "duration in seconds, 4-15 (snapped to 17n+5 frames)");
        auto* frames = job->add_option("--frames", o->frames, "frame count at 24 fps (snapped up to 17n+5)");
        secs->excludes(frames);
        auto* size =
            job->add_option("--size", o->size, "WxH in pixels, multiples of 32 (default: from --aspect)");
        auto* aspect =
            job->add_option("--aspect", o->aspect, "W:H on the 768-short-edge canvas (default 16:9)");
        size->excludes(aspect);
        job->add_option("--steps", o->steps,
                        "sigma grid points, terminal 0 included (N-1 forwards; default: the checkpoint's "
                        "h3_defaults.json, else 50)");
        job->add_option("--seed", o->seed, "seed of the torch-compatible generator")->capture_default_str();
        job->add_option("--first-frame", o->first_frame,
                        "fl2va: keyframe the video starts from (PNG/JPEG/WebP)");
        job->add_option("--last-frame", o->last_frame, "fl2va: keyframe the video ends on (PNG/JPEG/WebP)");
        job->add_option("--reference", o->references,
                        "ref2va: [image:|video:|audio:]FILE, repeatable, order kept (docs/references.md)");
        add_reference_size_options(job, o->reference_image_edge, o->reference_video_edge);
        CLI::App* out = sub->add_option_group("Output", "what to write");
        out->add_option("--save-latents", o->save_latents,
                        "safetensors of the noise and final latents (f32)");
        out->add_option("--output", o->output, "media file: .mp4, .wav or a folder of PNG frames");
        out->add_option("--progress", o->progress, "bar | json | none (default: bar on a terminal)")
            ->check(CLI::IsMember({"bar", "json", "none"}));
        out->add_option("--metrics", o->metrics, "JSON file of the job's metrics (default none)");
        CLI::App* acc =
            sub->add_option_group("Acceleration", "step caches and sparse attention (docs/caches.md)");
        acc->add_option("--cache", o->cache,
                        "step cache: none | teacache[:...] | dbcache[:...] | velocity[:...] (default none)");
        acc->add_option("--quality", o->quality, "lossless (default) | high (DBCache F1B0 R0.04)");
        add_attention_option(acc, o->attention);
        add_adapter_options(sub, o->adapters);
        add_residency_flags(sub, o->residency);
        add_parallel_flags(sub, o->parallel, /*launch=*/true);
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        // ---- the flags as engine options and a job request
        if (o->save_latents.empty() && o->output.empty())
            return report(
                invalid_argument("nothing to write: give --save-latents FILE and/or --output PATH"));
        if (!o->output.empty())
            if (auto k = pipeline::checked_output_kind(o->output); !k.ok())
                return report(Status(k.status().code(), "--" + k.status().message()));
        // no --model: the embedded demo model; its h3_defaults.json gives what the flags leave out (the
        // builder applies a checkpoint's declared defaults, --model or not)
        if (o->model.model.empty()) {
            auto demo = embedded_demo_model();
            if (!demo.ok()) return report(demo.status());
            o->model.model = demo->dir;
            std::fprintf(
                stderr,
                "generate: no --model: the embedded tiny demo model %s (trained on procedural clips of "
                "moving shapes; not MiniMax-H3); its defaults: %s\n",
                demo->dir.c_str(), demo->defaults.describe().c_str());
        }
        JobRequest rq;
        if (!o->prompt.empty()) rq.prompt = o->prompt;
        if (!o->prompt_embeds.empty()) rq.prompt_embeds = o->prompt_embeds;
        if (o->sub->count("--random-prompt-embeds")) rq.random_prompt_embeds = o->random_prompt_embeds;
        if (!o->size.empty()) rq.size = o->size;
        if (!o->aspect.empty()) rq.aspect = o->aspect;
        if (o->sub->count("--frames")) rq.frames = o->frames;
        if (o->sub->count("--seconds")) rq.seconds = o->seconds;
        if (o->sub->count("--steps"))
            rq.num_inference_steps =
                o->steps; // else --preset's, a FastH3 sidecar's, h3_defaults.json's or 50
        rq.seed = o->seed;
        if (!o->cache.empty()) rq.cache = o->cache;
        if (!o->quality.empty()) rq.quality = o->quality;
        if (!o->attention.empty()) rq.attention = o->attention;
        if (!o->first_frame.empty()) rq.first_frame = o->first_frame;
        if (!o->last_frame.empty()) rq.last_frame = o->last_frame;
        rq.reference = o->references;
        adapter_job_fields(*o->sub, o->adapters, rq);
        rq.output = o->output;
        rq.save_latents = o->save_latents;
        auto eo = engine_options(o->model, &o->residency, &o->parallel, &o->adapters);
        if (!eo.ok()) return report(eo.status());
        // unset: the checkpoint's h3_defaults.json reference edge, else the model's
        if (o->sub->count("--reference-image-edge")) eo->reference_image_edge = o->reference_image_edge;
        eo->reference_video_edge = o->reference_video_edge;
        // the whole request before the checkpoint is opened
        if (Status s = Engine::check(rq, *eo); !s.ok()) return report(s);
        if (Status s = Engine::check_files(rq, *eo); !s.ok()) return report(s);
        // every output path checked, its folders created, before the checkpoint is opened (by the writer:
        // rank 0 of a launched group, RANK / WORLD_SIZE)
        auto launched = runtime::process_rank_from_env();
        if (!launched.ok()) return report(launched.status());
        if (!*launched || (*launched)->rank == 0) {
            pipeline::OutputRequest outs;
            outs.latents = o->save_latents;
            if (!o->output.empty()) outs.media = pipeline::media_targets_for(o->output);
            std::string field;
            if (Status s = pipeline::prepare_outputs(outs, &field); !s.ok())
                return report(with_flag(s, field));
        }
        if (!o->metrics.empty())
            if (Status s =
                    io::prepare_output_path(o->metrics, {.extensions = {".json"}, .what = "a JSON file"});
                !s.ok())
                return report(Status(s.code(), "--metrics: " + s.message()));
        const std::string progress = !o->progress.empty() ? o->progress : (isatty(2) ? "bar" : "none");
        ProgressPrinter printer(progress); // from here: the wall time of the closing line

        // ---- the engine: the checkpoint's configs (a per-job plan loads nothing until the job leases it)
        auto engine = Engine::Impl::open(*eo, {});
        if (!engine.ok()) return report(engine.status());
        Engine::Impl& e = (*engine)->impl();
        // Several GPUs (or --launch processes): this command once per rank as child processes, each one rank
        // by the launcher convention; this process (its store loads nothing until a job leases a component)
        // waits for them.
        if (wants_rank_processes(o->parallel, e.plan[runtime::Component::kTransformer].device,
                                 e.launched.has_value()))
            return run_ranks_as_processes({.world = e.plan.parallel.world(), .gpus = e.plan.parallel.gpus});
        if (Status s =
                check_ranks_in_process(e.plan, "give --launch processes (the default for several --gpus)");
            !s.ok())
            return report(s);
        auto in = job_input(rq);
        if (!in.ok()) return report(in.status());
        auto job = e.build(std::move(in).value());
        if (!job.ok()) return report(job.status());
        if (!e.merged.empty())
            std::fprintf(stderr, "generate: %zu LoRA adapter(s) merged into the weights as the DiT loads\n",
                         e.merged.size());
        if (!job->checkpoint_defaults.empty())
            std::fprintf(stderr, "generate: from the checkpoint's %s: %s\n", runtime::kCheckpointDefaultsFile,
                         job->checkpoint_defaults.c_str());
        for (const std::string& w : job->warnings) std::fprintf(stderr, "generate: warning: %s\n", w.c_str());
        if (const std::string w = pipeline::slow_job_warning(*job, e.flops_per_second); !w.empty())
            std::fprintf(stderr,
                         "generate: warning: %s (here: --size, --seconds 4 or --frames, --steps 10, "
                         "--device cuda; the demo model: no --model)\n",
                         w.c_str());
        if (job->keyframes)
            std::fprintf(stderr, "generate: %zu keyframe(s) on a %dx%d canvas\n",
                         job->keyframes->images.size(), job->keyframes->canvas.width,
                         job->keyframes->canvas.height);
        if (job->references) std::fprintf(stderr, "generate: %zu reference(s)\n", job->references->size());
        if (const auto& set = job->adapters.set)
            std::fprintf(stderr,
                         "generate: %zu LoRA factor(s) applied at run time, rank <= %lld, %.1f MiB on %s\n",
                         set->factor_count(), static_cast<long long>(set->max_rank()),
                         static_cast<double>(set->device_bytes()) / (1 << 20), e.checkpoint().device.c_str());
        if (job->keyframes && job->prompt.empty())
            std::fprintf(stderr,
                         "generate: the keyframe images are not presented to a conditioner (%s gives the "
                         "conditioning rows as they are); their latents still condition\n",
                         job->prompt_embeds ? "--prompt-embeds" : "--random-prompt-embeds");
        const runtime::CheckpointInfo& info = e.checkpoint();
        std::fprintf(stderr,
                     "generate: %s, %d steps (%d forwards%s), seed %llu, shifts %g/%g, %s %s, cache %s, "
                     "attention %s\n",
                     job->geometry.describe().c_str(), job->steps, job->steps - 1, rungs_note(*job),
                     static_cast<unsigned long long>(job->seed), job->video_shift, job->audio_shift,
                     info.device.c_str(), info.dtype.c_str(), job->cache.describe().c_str(),
                     job->attention.describe().c_str());

        // ---- run (the engine places the weights for the job first; Ctrl-C cancels between stages, steps and
        // DiT blocks)
        pipeline::JobEvents events;
        events.cancel = &g_cancel;
        bool placed = false;
        events.progress = [&](const pipeline::JobProgress& p) {
            if (!placed) { // the first event: the weights are placed
                std::fprintf(stderr, "generate: %s\n", e.weights_text.c_str());
                placed = true;
            }
            printer(p);
        };
        Result<pipeline::JobReport> r = [&] {
            SigintScope sigint;
            return e.run(*job, events);
        }();
        if (!r.ok()) {
            printer.interrupted();
            if (r.status().code() == ErrorCode::kCancelled) {
                report(r.status());
                return kExitCancelled;
            }
            return report(r.status());
        }
        // ---- what happened
        if (r->keyframes)
            std::fprintf(stderr, "generate: encoded %d keyframe(s) in %.3f s\n", r->keyframes,
                         r->condition_seconds);
        if (r->references)
            std::fprintf(stderr, "generate: encoded %d reference(s) in %.3f s\n", r->references,
                         r->condition_seconds);
        if ((job->keyframes || job->references) && !job->prompt.empty())
            std::fprintf(stderr, "generate: conditioning %lld rows, %lld of them vision\n",
                         static_cast<long long>(r->conditioning_rows),
                         static_cast<long long>(r->vision_rows));
        if (!job->outputs.media.empty())
            std::fprintf(stderr, "generate: decoded %d frames %dx%d + %lld audio samples (%.3f s)\n",
                         r->frames, r->width, r->height, static_cast<long long>(r->audio_samples),
                         r->decode_seconds);
        if (!o->metrics.empty()) {
            if (Status w = io::write_json_file(o->metrics, r->metrics(job->task)); !w.ok()) return report(w);
        }
        if (!r->dit_weights.empty())
            std::fprintf(stderr, "generate: DiT weights %s\n", r->dit_weights.c_str());
        std::fprintf(stderr, "generate: %s\n", r->work.summary().c_str());
        double total = 0;
        for (double s : r->step_seconds) total += s;
        std::fprintf(stderr, "generate: %zu forwards in %.3f s (setup %.3f s)\n", r->step_seconds.size(),
                     total, r->setup_seconds);
        printer.done(*r, o->output, o->save_latents);
        return kExitOk;
    };
    return c;
}

} // namespace h3::cli
