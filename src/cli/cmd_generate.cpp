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
// A translator onto pipeline::Generator: the flags (and the files they name) become a pipeline::JobInput, the
// job builder validates it (first without the checkpoint, then against its configs), the generator runs it on
// a per-job runtime::ModelStore; errors name the flag of the field they are about.
#include "cli/adapter_options.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/demo_model.h"
#include "cli/field_flags.h"
#include "cli/parallel_flags.h"
#include "cli/progress_printer.h"
#include "cli/reference_options.h"
#include "cli/residency_flags.h"
#include "cli/spawn_ranks.h"
#include "cli/vsa_flags.h"
#include "io/image_reader.h"
#include "io/json_file.h"
#include "io/output_path.h"
#include "pipeline/cost_estimate.h"
#include "pipeline/generator.h"
#include "pipeline/job_builder.h"
#include "pipeline/reference_files.h"
#include "runtime/adapter_library.h"
#include "runtime/launcher.h"
#include "runtime/model_store.h"

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
        std::string model, prompt, prompt_embeds, size, aspect, device = "cpu", dtype = "bf16", save_latents,
                                                                output, progress, cache, quality, metrics,
                                                                precision = "bf16";
        std::string attention; // FastH3 (cli/vsa_flags.h)
        int random_prompt_embeds = 0, steps = 50, frames = 0;
        double seconds = 0;
        uint64_t seed = 0;
        std::string first_frame, last_frame; // fl2va keyframes
        std::vector<std::string> references; // ref2va, in order
        int reference_image_edge = 2048, reference_video_edge = 768;
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
        o->sub->add_option(
            "--model", o->model,
            "checkpoint root (either layout) or transformer folder (default: the embedded tiny "
            "demo model, models/h3-demo, at its native size; not MiniMax-H3)");
        auto* prompt =
            o->sub->add_option("--prompt", o->prompt, "prompt text (needs the checkpoint's text encoder)");
        auto* embeds =
            o->sub->add_option("--prompt-embeds", o->prompt_embeds,
                               "safetensors with a precomputed conditioner output prompt_embeds [L, "
                               "text_dim] (+ optional prompt_tags [L])");
        auto* rnd =
            o->sub->add_option("--random-prompt-embeds", o->random_prompt_embeds,
                               "use L random (seeded) conditioner rows instead of a prompt (testing)");
        prompt->excludes(embeds)->excludes(rnd);
        embeds->excludes(rnd);
        auto* secs = o->sub->add_option("--seconds", o->seconds,
                                        "duration in seconds (4-15; snapped up to the VAE's 17n+5 frames)");
        auto* frames =
            o->sub->add_option("--frames", o->frames, "frame count at 24 fps (snapped up to 17n+5)");
        secs->excludes(frames);
        auto* size = o->sub->add_option("--size", o->size,
                                        "WxH in pixels, multiples of the checkpoint's canvas multiple "
                                        "(VAE stride x patch: 32)");
        auto* aspect =
            o->sub->add_option("--aspect", o->aspect, "W:H on the 768-short-edge canvas (default 16:9)");
        size->excludes(aspect);
        o->sub->add_option("--steps", o->steps,
                           "sigma grid points, terminal 0 included (N points: N-1 forwards; default: the "
                           "checkpoint's h3_defaults.json, else 50)");
        o->sub->add_option("--seed", o->seed, "seed of the request's torch-compatible generator")
            ->capture_default_str();
        o->sub->add_option("--device", o->device, "cpu | cuda | cuda:N")->capture_default_str();
        o->sub
            ->add_option("--dtype", o->dtype,
                         "bf16 | fp32 | fp16 (GPUs without bf16: fp16 weights and activations, "
                         "fp32 residual stream)")
            ->check(CLI::IsMember({"bf16", "fp32", "fp16"}))
            ->capture_default_str();
        o->sub
            ->add_option(
                "--precision", o->precision,
                "DiT precision with --dtype bf16: bf16 (lossless) | fp8 (opt-in, lossy: the blocks' GEMMs "
                "and attention in e4m3; CUDA needs an H100/H200)")
            ->check(CLI::IsMember({"bf16", "fp8"}))
            ->capture_default_str();
        o->sub->add_option("--save-latents", o->save_latents,
                           "safetensors to write video_noise/video_latents [1,C,T,h,w] and audio_noise/"
                           "audio_latents [2,C_a,A] (f32)");
        o->sub->add_option("--output", o->output, "media file to write (needs the VAE decoders)");
        o->sub->add_option("--progress", o->progress, "bar | json | none (default: bar on a terminal)")
            ->check(CLI::IsMember({"bar", "json", "none"}));
        o->sub->add_option(
            "--cache", o->cache,
            "step cache: none | teacache[:thresh=0.17,coeffs=a/b/c/d/e] | "
            "dbcache[:Fn=1,Bn=0,rdt=0.04,warmup=4,mc=1,taylorseer=1,scm=fast] | "
            "velocity[:start=0.2,end=0.8,refresh_interval=2,max_reuse=1,threshold=T]; any takes "
            "refresh=K,refresh_policy=once|repeat");
        o->sub->add_option("--quality", o->quality,
                           "lossless (no cache, default) | high (DBCache F1B0 R0.04)");
        o->sub->add_option(
            "--metrics", o->metrics,
            "JSON file for the job's metrics (work counters per step and totals, stage seconds, "
            "component loads)");
        o->sub->add_option("--first-frame", o->first_frame,
                           "fl2va: keyframe the video starts from (PNG/JPEG/WebP)");
        o->sub->add_option("--last-frame", o->last_frame,
                           "fl2va: keyframe the video ends on (PNG/JPEG/WebP)");
        o->sub->add_option("--reference", o->references,
                           "ref2va (repeatable, order kept; uses transformer_ref): an image, a video (its "
                           "soundtrack comes along) or an audio clip; prefix image:, video: or audio: to "
                           "choose the kind (audio:clip.mp4 takes a video's soundtrack alone). At most 9 "
                           "images, 3 videos, 3 audio clips, 12 in all; audio never alone; clips are cut to "
                           "the generated length");
        add_reference_size_options(o->sub, o->reference_image_edge, o->reference_video_edge);
        add_adapter_options(o->sub, o->adapters);
        add_attention_option(o->sub, o->attention);
        add_residency_flags(o->sub, o->residency);
        add_parallel_flags(o->sub, o->parallel);
        add_launch_flag(o->sub, o->parallel);
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        // ---- the flags as the job builder's input; the files they name are read here
        if (o->save_latents.empty() && o->output.empty())
            return report(
                invalid_argument("nothing to write: give --save-latents FILE and/or --output PATH"));
        if (!o->output.empty())
            if (auto k = pipeline::checked_output_kind(o->output); !k.ok())
                return report(Status(k.status().code(), "--" + k.status().message()));
        // no --model: the embedded demo model; its h3_defaults.json gives what the flags leave out (the
        // builder applies a checkpoint's declared defaults, --model or not)
        if (o->model.empty()) {
            auto demo = embedded_demo_model();
            if (!demo.ok()) return report(demo.status());
            o->model = demo->dir;
            std::fprintf(
                stderr,
                "generate: no --model: the embedded tiny demo model %s (trained on procedural clips of "
                "moving shapes; not MiniMax-H3); its defaults: %s\n",
                demo->dir.c_str(), demo->defaults.describe().c_str());
        }
        pipeline::JobInput in;
        if (!o->prompt.empty()) in.prompt = o->prompt;
        if (o->sub->count("--random-prompt-embeds")) in.random_prompt_embeds = o->random_prompt_embeds;
        if (!o->size.empty()) in.size = o->size;
        if (!o->aspect.empty()) in.aspect = o->aspect;
        if (o->sub->count("--frames")) in.frames = o->frames;
        if (o->sub->count("--seconds")) in.seconds = o->seconds;
        if (o->sub->count("--steps"))
            in.num_inference_steps =
                o->steps; // else --preset's, a FastH3 sidecar's, h3_defaults.json's or 50
        in.seed = o->seed;
        if (!o->cache.empty()) in.cache = nlohmann::json(o->cache);
        if (!o->quality.empty()) in.quality = o->quality;
        in.outputs.latents = o->save_latents;
        attention_input(o->attention, in);
        if (!o->output.empty()) in.outputs.media = pipeline::media_targets_for(o->output);
        if (!o->prompt_embeds.empty()) {
            // the width is checked against the checkpoint by the builder
            auto embeds = pipeline::make_embeds_conditioner(o->prompt_embeds, 0);
            if (!embeds.ok()) return report(embeds.status());
            auto rows = (*embeds)->encode({});
            if (!rows.ok()) return report(rows.status());
            in.prompt_embeds = std::move(rows).value();
            in.prompt_embeds_source = o->prompt_embeds;
        }
        for (auto [path, slot] :
             {std::pair{&o->first_frame, &in.first_frame}, std::pair{&o->last_frame, &in.last_frame}}) {
            if (path->empty()) continue;
            auto im = io::read_image(*path);
            if (!im.ok()) return report(im.status());
            *slot = std::move(im).value();
        }
        for (const std::string& spec : o->references) {
            auto r = pipeline::read_reference(pipeline::parse_reference_spec(spec));
            if (!r.ok()) return report(r.status().with_context("--reference " + spec));
            in.references.push_back(std::move(r).value());
        }
        if (Status s = adapter_flags_to_input(*o->sub, o->adapters, in.adapters); !s.ok()) return report(s);
        pipeline::JobBuilderOptions bo{.reference_image_edge = o->reference_image_edge,
                                       .reference_video_edge = o->reference_video_edge};
        // the whole request before the checkpoint is opened
        std::string field;
        if (Status s = pipeline::JobBuilder::check(in, bo, &field); !s.ok())
            return report(with_flag(s, field));
        // every output path checked, its folders created, before the checkpoint is opened
        if (Status s = pipeline::prepare_outputs(in.outputs, &field); !s.ok())
            return report(with_flag(s, field));
        if (!o->metrics.empty())
            if (Status s =
                    io::prepare_output_path(o->metrics, {.extensions = {".json"}, .what = "a JSON file"});
                !s.ok())
                return report(Status(s.code(), "--metrics: " + s.message()));
        const std::string progress = !o->progress.empty() ? o->progress : (isatty(2) ? "bar" : "none");
        ProgressPrinter printer(progress); // from here: the wall time of the closing line

        // ---- the checkpoint's configs (a per-job plan loads nothing until the job leases it), then the job
        auto device = parse_device(o->device);
        if (!device.ok()) return report(device.status().with_context("--device"));
        auto precision = compute_precision(o->dtype, o->precision);
        if (!precision.ok()) return report(precision.status());
        // One process of a launched group (RANK / WORLD_SIZE): CUDA ranks run on cuda:LOCAL_RANK.
        auto launched = runtime::process_rank_from_env();
        if (!launched.ok()) return report(launched.status());
        if (*launched && device->is_cuda()) *device = Device::cuda((*launched)->local_rank);
        runtime::PlacementPlan plan = runtime::PlacementPlan::per_job(*device, *precision);
        if (*launched) plan.parallel.process = **launched;
        if (Status s = apply_parallel_flags(o->parallel, plan); !s.ok()) return report(s);
        auto store = runtime::ModelStore::open(o->model, plan);
        if (!store.ok()) return report(store.status());
        if (Status s = check_parallel_flags(plan, (*store)->info().dit ? &*(*store)->info().dit : nullptr);
            !s.ok())
            return report(s);
        // Several GPUs (or --launch processes): this command once per rank as child processes, each one rank
        // by the launcher convention; this process (its store loads nothing until a job leases
        // a component) waits for them.
        if (wants_rank_processes(o->parallel, *device, launched->has_value()))
            return run_ranks_as_processes({.world = plan.parallel.world(), .gpus = plan.parallel.gpus});
        if (Status s =
                check_ranks_in_process(plan, "give --launch processes (the default for several --gpus)");
            !s.ok())
            return report(s);
        // ---- LoRA: merged into the DiT when it loads (read here, before any weight), or resolved by the
        // builder through a library of the named files and applied at run time
        std::unique_ptr<runtime::AdapterLibrary> adapter_files;
        if (!o->adapters.lora.empty() && (*store)->info().dit) {
            const runtime::CheckpointInfo& ci = (*store)->info();
            if (o->adapters.lora_mode == "merged") {
                auto uses = read_lora_options(o->adapters, *ci.dit);
                if (!uses.ok()) return report(uses.status());
                std::vector<std::string> names;
                for (const pipeline::LoraInput& l : in.adapters.lora)
                    names.push_back(pipeline::lora_use_name(l.path, l.scale));
                if (Status s = (*store)->set_merged_adapters(std::move(uses).value(), names); !s.ok())
                    return report(s);
                bo.lora.merged = names;
                std::fprintf(stderr,
                             "generate: %zu LoRA adapter(s) merged into the weights as the DiT loads\n",
                             names.size());
            } else {
                auto lib =
                    runtime::AdapterLibrary::open({.config = *ci.dit,
                                                   .ctx = (*store)->context(),
                                                   .dtype = ci.dtype == "fp32" ? DType::kF32 : DType::kBF16,
                                                   .read = lora_read_options(o->adapters),
                                                   .any_path = true});
                if (!lib.ok()) return report(lib.status());
                adapter_files = std::move(lib).value();
                bo.lora.library = adapter_files.get();
            }
        }
        auto rate = pipeline::cpu_flops_rate(**store); // a CPU job's estimate (0 on a GPU)
        if (!rate.ok()) return report(rate.status());
        bo.flops_per_second = *rate;
        if (const auto& d = (*store)->info().defaults;
            d && d->reference_image_edge && !o->sub->count("--reference-image-edge"))
            bo.reference_image_edge = *d->reference_image_edge; // the checkpoint's trained reference edge
        const pipeline::JobBuilder builder((*store)->info(), bo);
        auto job = builder.build(std::move(in), &field);
        if (!job.ok()) return report(with_flag(job.status(), field));
        {
            // ---- weight placement (the planner sizes the job under --gpu-memory-budget), before any weight
            // moves; the plan is per job, so the DiT leaves the device before the decoders load
            const pipeline::Geometry& g = job->geometry;
            const int64_t text_rows = job->random_prompt_rows > 0 ? job->random_prompt_rows
                                      : job->prompt_embeds        ? job->prompt_embeds->rows()
                                                                  : 537;
            const int cache_buffers = job->cache.kind == cache::CacheKind::kNone ? 0 : 4;
            auto choice = resolve_checkpoint_residency(
                o->residency, o->model, *precision,
                workload_for(g.rows_per_frame() * g.latent_frames, 2LL * g.audio_latents, text_rows,
                             job->steps, cache_buffers, g.width, g.height),
                job->task == pipeline::Task::kRef2va, false);
            if (!choice.ok()) return report(choice.status());
            apply_residency(*choice, plan, false);
            std::fprintf(stderr, "generate: %s\n", choice->describe().c_str());
            if (Status s = (*store)->replan(plan); !s.ok()) return report(s);
        }
        if (!job->checkpoint_defaults.empty())
            std::fprintf(stderr, "generate: from the checkpoint's %s: %s\n", runtime::kCheckpointDefaultsFile,
                         job->checkpoint_defaults.c_str());
        for (const std::string& w : job->warnings) std::fprintf(stderr, "generate: warning: %s\n", w.c_str());
        if (const std::string w = pipeline::slow_job_warning(*job, bo.flops_per_second); !w.empty())
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
            std::fprintf(
                stderr, "generate: %zu LoRA factor(s) applied at run time, rank <= %lld, %.1f MiB on %s\n",
                set->factor_count(), static_cast<long long>(set->max_rank()),
                static_cast<double>(set->device_bytes()) / (1 << 20), (*store)->info().device.c_str());
        if (job->keyframes && job->prompt.empty())
            std::fprintf(stderr,
                         "generate: the keyframe images are not presented to a conditioner (%s gives the "
                         "conditioning rows as they are); their latents still condition\n",
                         job->prompt_embeds ? "--prompt-embeds" : "--random-prompt-embeds");
        const runtime::CheckpointInfo& info = (*store)->info();
        std::fprintf(stderr,
                     "generate: %s, %d steps (%d forwards%s), seed %llu, shifts %g/%g, %s %s, cache %s, "
                     "attention %s\n",
                     job->geometry.describe().c_str(), job->steps, job->steps - 1, rungs_note(*job),
                     static_cast<unsigned long long>(job->seed), job->video_shift, job->audio_shift,
                     info.device.c_str(), info.dtype.c_str(), job->cache.describe().c_str(),
                     job->attention.describe().c_str());

        // ---- run (Ctrl-C cancels between stages, steps and DiT blocks)
        auto generator = pipeline::Generator::create(**store);
        if (!generator.ok()) return report(generator.status());
        pipeline::JobEvents events;
        events.cancel = &g_cancel;
        events.progress = [&printer](const pipeline::JobProgress& p) { printer(p); };
        Result<pipeline::JobReport> r = [&] {
            SigintScope sigint;
            return (*generator)->run(*job, events);
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
