// h3-engine generate --model DIR (--prompt TEXT | --prompt-embeds FILE | --random-prompt-embeds L)
//   [--seconds S | --frames F] [--size WxH | --aspect W:H] [--steps N] [--seed N] [--device cpu|cuda]
//   [--dtype bf16|fp32] [--save-latents FILE] [--output PATH] [--progress bar|json|none]
//   [--cache SPEC | --quality lossless|high] [--metrics FILE] [--first-frame IMG] [--last-frame IMG]
//   [--reference [image:|video:|audio:]FILE ...] [--dtype fp16] [--residency resident|layerwise]
//   [--resident-blocks K] [--weight-dtype bf16|int8|auto] [--host-pinning on|off] [--gpu-memory-budget SIZE]
#include "api/engine.h"
#include "api/video_request.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/device_setup.h"
#include "cli/reference_options.h"
#include "cli/residency_flags.h"
#include "core/torch_generator.h"
#include "io/checkpoint.h"
#include "io/image_reader.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/dit/dit_model.h"
#include "pipeline/conditioner.h"
#include "pipeline/decode.h"
#include "pipeline/fl2va.h"
#include "pipeline/generate.h"
#include "pipeline/keyframe_image.h"
#include "pipeline/ref2va.h"
#include "pipeline/reference_files.h"

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <tuple>
#include <unistd.h>

namespace h3::cli {

namespace {

constexpr int kExitCancelled = 130; // the shell's code for SIGINT

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

Status parse_pair(const std::string& text, char sep, const std::string& field, double& a, double& b) {
    const auto p = text.find(sep);
    try {
        if (p == std::string::npos) throw std::invalid_argument(text);
        size_t n1 = 0, n2 = 0;
        a = std::stod(text.substr(0, p), &n1);
        b = std::stod(text.substr(p + 1), &n2);
        if (n1 != p || n2 != text.size() - p - 1) throw std::invalid_argument(text);
    } catch (const std::exception&) {
        return invalid_argument(field + " '" + text + "' must look like " +
                                (sep == 'x' ? "1344x768" : "16:9"));
    }
    return ok_status();
}

void print_bar(const pipeline::StepProgress& p) {
    const int width = 30, filled = p.total ? width * p.step / p.total : width;
    std::fprintf(stderr, "\r[%.*s%*s] %d/%d  %.2f s/step  ETA %.0f s", filled,
                 "##############################", width - filled, "", p.step, p.total, p.step_seconds,
                 p.eta_seconds);
    if (p.step == p.total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
}

} // namespace

Command make_generate_command() {
    struct Options {
        std::string model, prompt, prompt_embeds, size, aspect, device = "cpu", dtype = "bf16", save_latents,
                                                                output, progress, cache, quality, metrics;
        int random_prompt_embeds = 0, steps = 50, frames = 0;
        double seconds = 0;
        uint64_t seed = 0;
        std::string first_frame, last_frame; // fl2va keyframes
        std::vector<std::string> references; // ref2va, in order
        int reference_image_edge = 2048, reference_video_edge = 768;
        ResidencyFlags residency;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand(
            "generate",
            "Generate video+audio from a prompt (t2va), with keyframes (fl2va) or with references (ref2va)");
        o->sub->add_option("--model", o->model, "checkpoint root (either layout) or transformer folder")
            ->required();
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
                                        "duration in seconds (4-15; snapped up to 17n+5 frames)");
        auto* frames =
            o->sub->add_option("--frames", o->frames, "frame count at 24 fps (snapped up to 17n+5)");
        secs->excludes(frames);
        auto* size = o->sub->add_option("--size", o->size, "WxH in pixels, multiples of 32");
        auto* aspect =
            o->sub->add_option("--aspect", o->aspect, "W:H on the 768-short-edge canvas (default 16:9)");
        size->excludes(aspect);
        o->sub
            ->add_option("--steps", o->steps,
                         "sigma grid points, terminal 0 included (N points: N-1 forwards)")
            ->capture_default_str();
        o->sub->add_option("--seed", o->seed, "seed of the request's torch-compatible generator")
            ->capture_default_str();
        o->sub->add_option("--device", o->device, "cpu | cuda | cuda:N")->capture_default_str();
        o->sub
            ->add_option("--dtype", o->dtype,
                         "bf16 | fp32 | fp16 (GPUs without bf16: fp16 weights and activations, "
                         "fp32 residual stream)")
            ->check(CLI::IsMember({"bf16", "fp32", "fp16"}))
            ->capture_default_str();
        add_residency_flags(o->sub, o->residency);
        o->sub->add_option("--save-latents", o->save_latents,
                           "safetensors to write video_noise/video_latents [1,24,T,h,w] and audio_noise/"
                           "audio_latents [2,32,A] (f32)");
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
        o->sub->add_option("--metrics", o->metrics, "JSON file for the work counters (per step and totals)");
        o->sub->add_option("--first-frame", o->first_frame,
                           "fl2va: keyframe the video starts from (PNG/JPEG/WebP)");
        o->sub->add_option("--last-frame", o->last_frame,
                           "fl2va: keyframe the video ends on (PNG/JPEG/WebP)");
        o->sub->add_option("--reference", o->references,
                           "ref2va (repeatable, order kept; uses transformer_ref): an image, a video (its "
                           "soundtrack comes along) or an audio clip; prefix image:, video: or audio: to "
                           "choose the kind (audio:clip.mp4 takes a video's soundtrack alone). At most 9 "
                           "images, 3 videos, 3 audio clips, 12 in all; audio never alone; clips 2-15 s, "
                           "15 s together");
        add_reference_size_options(o->sub, o->reference_image_edge, o->reference_video_edge);
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        // ---- validate the whole request before loading anything
        pipeline::GenerationRequest rq;
        if (!o->size.empty()) {
            int w = 0, h = 0;
            if (Status s = api::parse_size(o->size, "size", w, h); !s.ok()) return report(s);
            rq.geometry.width = w;
            rq.geometry.height = h;
        }
        if (!o->aspect.empty()) {
            double aw = 0, ah = 0;
            if (Status s = parse_pair(o->aspect, ':', "aspect", aw, ah); !s.ok()) return report(s);
            rq.geometry.aspect_w = aw;
            rq.geometry.aspect_h = ah;
        }
        if (o->sub->count("--frames")) rq.geometry.frames = o->frames;
        if (o->sub->count("--seconds")) rq.geometry.seconds = o->seconds;
        rq.steps = o->steps;
        rq.seed = o->seed;
        auto geometry = pipeline::resolve_geometry(rq.geometry);
        if (!geometry.ok()) return report(geometry.status());
        if (auto s = pipeline::make_schedule(rq.steps, 1.0); !s.ok()) return report(s.status());
        if (o->prompt.empty() && o->prompt_embeds.empty() && o->random_prompt_embeds == 0)
            return report(
                invalid_argument("give --prompt, --prompt-embeds FILE or --random-prompt-embeds L"));
        if (o->sub->count("--random-prompt-embeds") &&
            (o->random_prompt_embeds < 1 || o->random_prompt_embeds > 65536))
            return report(invalid_argument("--random-prompt-embeds must lie in [1, 65536]"));
        // ---- DECODERS: `--output` decodes the final latents (video/audio VAE) and writes MP4 / WAV / PNGs.
        if (o->save_latents.empty() && o->output.empty())
            return report(
                invalid_argument("nothing to write: give --save-latents FILE and/or --output PATH"));
        const std::string progress = !o->progress.empty() ? o->progress : (isatty(2) ? "bar" : "none");
        { // the server's rule: --cache or --quality, never both
            auto spec = api::resolve_cache_choice(
                o->cache.empty() ? nlohmann::json() : nlohmann::json(o->cache), o->quality);
            if (!spec.ok()) return report(spec.status());
            rq.cache = *spec;
        }

        // ---- fl2va keyframes: decoded and put onto the canvas (spec §3 step 2) before anything is loaded
        std::optional<pipeline::PreparedKeyframes> keyframes;
        if (!o->first_frame.empty() || !o->last_frame.empty()) {
            if (!o->aspect.empty())
                return report(
                    invalid_argument("--aspect does not apply with keyframes: the canvas comes from "
                                     "the first keyframe unless --size is given"));
            io::DecodedImage first, last;
            pipeline::KeyframeRequest kr;
            for (auto [path, img, slot] : {std::tuple{&o->first_frame, &first, &kr.first},
                                           std::tuple{&o->last_frame, &last, &kr.last}}) {
                if (path->empty()) continue;
                auto r = io::read_image(*path);
                if (!r.ok()) return report(r.status());
                *img = std::move(r).value();
                *slot = &img->image;
            }
            if (rq.geometry.width) kr.canvas = pipeline::Canvas{*rq.geometry.width, *rq.geometry.height};
            auto kf = pipeline::prepare_keyframes(kr);
            if (!kf.ok()) return report(kf.status());
            // the canvas is the request's size from here on
            rq.geometry.width = kf->canvas.width;
            rq.geometry.height = kf->canvas.height;
            geometry = pipeline::resolve_geometry(rq.geometry);
            if (!geometry.ok()) return report(geometry.status());
            std::fprintf(stderr, "generate: %zu keyframe(s) on a %dx%d canvas\n", kf->images.size(),
                         kf->canvas.width, kf->canvas.height);
            keyframes = std::move(kf).value();
        }

        // ---- ref2va references: decoded, checked against the rules and normalized before anything is loaded
        std::vector<pipeline::NormalizedReference> references;
        if (!o->references.empty()) {
            if (keyframes)
                return report(invalid_argument(
                    "--reference (ref2va) cannot be combined with --first-frame/--last-frame (fl2va)"));
            if (!o->prompt_embeds.empty() || o->random_prompt_embeds > 0)
                return report(invalid_argument(
                    "--reference needs --prompt: the references are presented to the text encoder with it"));
            std::vector<pipeline::ReferenceMedia> media;
            for (const std::string& spec : o->references) {
                auto r = pipeline::read_reference(pipeline::parse_reference_spec(spec));
                if (!r.ok()) return report(r.status().with_context("--reference " + spec));
                media.push_back(std::move(r).value());
            }
            if (Status s = pipeline::validate_references(media); !s.ok()) return report(s);
            auto norm = pipeline::normalize_references(media, {.num_frames = geometry->frames,
                                                               .image_short_edge = o->reference_image_edge,
                                                               .video_short_edge = o->reference_video_edge});
            if (!norm.ok()) return report(norm.status());
            references = std::move(norm).value();
            std::fprintf(stderr, "generate: %zu reference(s)\n", references.size());
        }

        // ---- checkpoint, conditioner, model
        auto dir = io::discover_checkpoint(o->model);
        if (!dir.ok()) return report(dir.status());
        rq.video_shift = dir->video_shift.value_or(pipeline::kDefaultVideoShift);
        rq.audio_shift = dir->audio_shift.value_or(pipeline::kDefaultAudioShift);
        // ref2va runs on the Ref2VA DiT (transformer_ref/), t2va and fl2va on the FL2VA one (transformer/)
        auto ckpt =
            model::open_dit_checkpoint(o->model, references.empty() ? "transformer" : "transformer_ref");
        if (!ckpt.ok()) return report(ckpt.status());
        const int text_dim = ckpt->config.text_dim;
        // the cache against this checkpoint and schedule, before any weight is loaded
        if (Status s = api::check_cache(rq.cache, rq.steps, ckpt->config); !s.ok()) return report(s);
        // ---- weight placement (the planner under --gpu-memory-budget), before any weight is loaded
        const model::DitPrecision precision = *model::parse_precision(o->dtype, "--dtype");
        ResidencyChoice placement;
        {
            std::vector<runtime::ComponentBytes> comps;
            if (!o->residency.gpu_memory_budget.empty()) {
                const int64_t text_rows = o->random_prompt_embeds > 0 ? o->random_prompt_embeds : 537;
                const int cache_buffers = rq.cache.kind == cache::CacheKind::kNone ? 0 : 4;
                auto sized = runtime::checkpoint_component_bytes(
                    o->model, precision,
                    workload_for(geometry->rows_per_frame() * geometry->latent_frames,
                                 2LL * geometry->audio_latents, text_rows, rq.steps, cache_buffers,
                                 geometry->width, geometry->height),
                    references.empty() ? "transformer" : "transformer_ref");
                if (!sized.ok()) return report(sized.status());
                comps = std::move(sized).value();
            }
            auto choice = resolve_residency(o->residency, comps);
            if (!choice.ok()) return report(choice.status());
            placement = std::move(choice).value();
            std::fprintf(stderr, "generate: %s\n", placement.describe().c_str());
        }
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        const ops::Context& ctx = (*session)->context();

        // ---- fl2va: the keyframes' conditioning latents (VAE encoder, released again before the DiT loads)
        // and the images the conditioner presents with the prompt
        pipeline::Fl2vaInputs fl2va;
        if (keyframes) {
            SigintScope sigint;
            pipeline::Fl2vaOptions fo;
            fo.cancel = &g_cancel;
            auto r = pipeline::prepare_fl2va(ctx, o->model, *keyframes, fo);
            if (!r.ok())
                return r.status().code() == ErrorCode::kCancelled ? (report(r.status()), kExitCancelled)
                                                                  : report(r.status());
            fl2va = std::move(r).value();
            rq.keyframes = fl2va.keyframes;
            std::fprintf(stderr, "generate: encoded %zu keyframe(s) in %.3f s\n", fl2va.keyframes.size(),
                         fl2va.encode_seconds);
            if (o->prompt.empty())
                std::fprintf(stderr,
                             "generate: the keyframe images are not presented to a conditioner (%s "
                             "gives the conditioning rows as they are); their latents still condition\n",
                             o->prompt_embeds.empty() ? "--random-prompt-embeds" : "--prompt-embeds");
        }

        // ---- ref2va: the references' encodings (VAE encoders, released again before the DiT loads)
        pipeline::Ref2vaInputs ref2va;
        if (!references.empty()) {
            SigintScope sigint;
            pipeline::Ref2vaOptions ro;
            ro.cancel = &g_cancel;
            auto r = pipeline::prepare_ref2va(ctx, o->model, references, ro);
            if (!r.ok())
                return r.status().code() == ErrorCode::kCancelled ? (report(r.status()), kExitCancelled)
                                                                  : report(r.status());
            ref2va = std::move(r).value();
            rq.references = ref2va.references;
            std::fprintf(stderr, "generate: encoded %zu reference(s) in %.3f s\n", ref2va.references.size(),
                         ref2va.encode_seconds);
        }

        pipeline::Conditioning cond;
        if (o->random_prompt_embeds > 0) {
            // Conditioner outputs are bf16; round like one.
            const int64_t L = o->random_prompt_embeds;
            cond.embeddings = Tensor::host(Shape{L, text_dim}, DType::kF32);
            TorchGenerator g(o->seed ^ 0x9e3779b97f4a7c15ull);
            float* p = cond.embeddings.data_as<float>();
            g.randn(p, static_cast<size_t>(cond.embeddings.numel()));
            for (int64_t i = 0; i < cond.embeddings.numel(); ++i) p[i] = round_bf16(p[i]);
            cond.tags.assign(static_cast<size_t>(L), pipeline::kTagText);
        } else {
            Result<std::unique_ptr<pipeline::Conditioner>> conditioner =
                o->prompt_embeds.empty() ? pipeline::make_prompt_conditioner({.checkpoint_dir = o->model,
                                                                              .ctx = ctx,
                                                                              .fp32 = o->dtype == "fp32",
                                                                              .fp16 = o->dtype == "fp16",
                                                                              .residency = placement.text})
                                         : pipeline::make_embeds_conditioner(o->prompt_embeds, text_dim);
            if (!conditioner.ok()) return report(conditioner.status());
            SigintScope sigint;
            pipeline::ConditionerRequest creq;
            creq.prompt = o->prompt;
            if (!o->prompt.empty()) creq.images = std::move(fl2va.images);
            creq.references = std::move(ref2va.conditioner);
            pipeline::ConditionerOptions copt;
            copt.cancel = &g_cancel;
            auto r = (*conditioner)->encode(creq, copt);
            if (!r.ok())
                return r.status().code() == ErrorCode::kCancelled ? (report(r.status()), kExitCancelled)
                                                                  : report(r.status());
            cond = std::move(r).value();
            if ((keyframes || !references.empty()) && !o->prompt.empty()) {
                int64_t vision_rows = 0;
                for (int32_t t : cond.tags) vision_rows += t == pipeline::kTagVideo;
                std::fprintf(stderr, "generate: conditioning %lld rows, %lld of them vision\n",
                             static_cast<long long>(cond.rows()), static_cast<long long>(vision_rows));
            }
        }

        model::DitLoadOptions lo{.device = ctx.device, .precision = precision, .residency = placement.dit};
        auto m = model::DitModel::load(*ckpt, lo, ctx);
        if (!m.ok()) return report(m.status());
        std::fprintf(stderr,
                     "generate: %s, %d steps (%d forwards), seed %llu, shifts %g/%g, %s %s, cache %s\n",
                     geometry->describe().c_str(), rq.steps, rq.steps - 1,
                     static_cast<unsigned long long>(rq.seed), rq.video_shift, rq.audio_shift,
                     ctx.device.to_string().c_str(), o->dtype.c_str(), rq.cache.describe().c_str());

        // ---- denoise (Ctrl-C cancels between steps and between blocks)
        pipeline::DenoiseOptions dopt;
        dopt.cancel = &g_cancel;
        if (progress == "bar") dopt.progress = print_bar;
        if (progress == "json")
            dopt.progress = [](const pipeline::StepProgress& p) {
                std::printf("{\"event\":\"step\",\"step\":%d,\"total\":%d,\"seconds\":%.6f,\"elapsed\":%.6f,"
                            "\"eta\":%.6f}\n",
                            p.step, p.total, p.step_seconds, p.elapsed_seconds, p.eta_seconds);
                std::fflush(stdout);
            };
        Result<pipeline::GenerationOutput> out = [&] {
            SigintScope sigint;
            return pipeline::generate_latents(**m, cond, rq, dopt);
        }();
        if (!out.ok()) {
            if (out.status().code() == ErrorCode::kCancelled) {
                if (progress == "bar") std::fprintf(stderr, "\n");
                report(out.status());
                return kExitCancelled;
            }
            return report(out.status());
        }

        if (const model::LayerWeightSource* src = (*m)->block_source())
            std::fprintf(stderr, "generate: DiT weights %s: %s\n", src->options().describe().c_str(),
                         src->stats().summary().c_str());
        m->reset(); // the DiT leaves the device before the decoders load (the memory plan's decode stage)

        // ---- outputs
        const std::map<std::string, std::string> meta = {{"seed", std::to_string(rq.seed)},
                                                         {"steps", std::to_string(rq.steps)},
                                                         {"width", std::to_string(out->geometry.width)},
                                                         {"height", std::to_string(out->geometry.height)},
                                                         {"frames", std::to_string(out->geometry.frames)},
                                                         {"video_shift", std::to_string(rq.video_shift)},
                                                         {"audio_shift", std::to_string(rq.audio_shift)},
                                                         {"dtype", o->dtype},
                                                         {"device", ctx.device.to_string()}};
        if (!o->save_latents.empty()) {
            Status w = io::write_safetensors(o->save_latents,
                                             {{"video_noise", out->video_noise},
                                              {"video_latents", out->video_latents},
                                              {"audio_noise", out->audio_noise},
                                              {"audio_latents", out->audio_latents}},
                                             meta);
            if (!w.ok()) return report(w);
        }
        if (!o->output.empty()) {
            auto d =
                pipeline::decode_to_file(ctx, o->model, out->video_latents, out->audio_latents, o->output);
            if (!d.ok()) return report(d.status());
            std::fprintf(
                stderr,
                "generate: decoded %d frames %dx%d + %lld audio samples (video %.3f s, audio %.3f s)\n",
                d->frames, d->width, d->height, static_cast<long long>(d->audio_samples),
                d->video_decode_seconds, d->audio_decode_seconds);
        }
        if (!o->metrics.empty()) {
            nlohmann::json mj = out->work.to_json();
            mj["device"] = ctx.device.to_string();
            mj["dtype"] = o->dtype;
            if (Status w = io::write_json_file(o->metrics, mj); !w.ok()) return report(w);
        }
        std::fprintf(stderr, "generate: %s\n", out->work.summary().c_str());
        double total = 0;
        for (double s : out->step_seconds) total += s;
        if (progress == "json")
            std::printf("{\"event\":\"done\",\"steps\":%zu,\"denoise_seconds\":%.6f,\"setup_seconds\":%.6f,"
                        "\"latents\":\"%s\"}\n",
                        out->step_seconds.size(), total, out->setup_seconds, o->save_latents.c_str());
        std::fprintf(stderr, "generate: %zu forwards in %.3f s (setup %.3f s), wrote %s%s%s\n",
                     out->step_seconds.size(), total, out->setup_seconds, o->save_latents.c_str(),
                     o->save_latents.empty() || o->output.empty() ? "" : " and ", o->output.c_str());
        return kExitOk;
    };
    return c;
}

} // namespace h3::cli
