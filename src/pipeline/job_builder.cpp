#include "pipeline/job_builder.h"

#include "cache/step_cache.h"
#include "io/output_path.h"
#include "pipeline/cost_estimate.h"
#include "pipeline/job_attention.h"
#include "pipeline/schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <random>

namespace h3::pipeline {

namespace {

using runtime::Component;

// Prefixes the field name unless the message already starts with it, and reports the field (in `out` and
// in Status::field).
Status field_error(const std::string& field, const Status& s, std::string* out) {
    if (out) *out = field;
    if (s.message().rfind(field, 0) == 0) return s.with_field(field);
    return Status(s.code(), field + ": " + s.message()).with_field(field);
}

Status field_error(const std::string& field, const std::string& message, std::string* out) {
    return field_error(field, invalid_argument(message), out);
}

Status parse_aspect(const std::string& text, double& a, double& b) {
    const auto p = text.find(':');
    try {
        if (p == std::string::npos) throw std::invalid_argument(text);
        size_t n1 = 0, n2 = 0;
        a = std::stod(text.substr(0, p), &n1);
        b = std::stod(text.substr(p + 1), &n2);
        if (n1 != p || n2 != text.size() - p - 1) throw std::invalid_argument(text);
    } catch (const std::exception&) {
        return invalid_argument("aspect '" + text + "' must look like 16:9");
    }
    return ok_status();
}

bool has_keyframes(const JobInput& in) {
    return in.first_frame.has_value() || in.last_frame.has_value();
}

int conditioning_sources(const JobInput& in) {
    return int(in.prompt.has_value()) + int(in.prompt_embeds.has_value()) +
           int(in.random_prompt_embeds.has_value());
}

std::string describe_reference(size_t i, const ReferenceMedia& r) {
    std::string d = "reference " + std::to_string(i + 1) + ": " + reference_kind_name(r.kind);
    if (r.kind == ReferenceKind::kImage)
        d += " " + std::to_string(r.image.width) + "x" + std::to_string(r.image.height);
    if (r.kind == ReferenceKind::kVideo)
        d += " " + std::to_string(r.frames.dim(2)) + "x" + std::to_string(r.frames.dim(1));
    if (r.kind != ReferenceKind::kImage) {
        char buf[32];
        std::snprintf(buf, sizeof buf, ", %.2f s", r.clip_seconds());
        d += buf;
    }
    if (r.kind == ReferenceKind::kVideo && r.has_audio()) d += ", with audio";
    return d;
}

Result<Task> task_of(const JobInput& in, std::string* field) {
    const bool kf = has_keyframes(in), refs = !in.references.empty();
    const Task implied = refs ? Task::kRef2va : kf ? Task::kFl2va : Task::kT2va;
    if (!in.task) return implied;
    auto t = parse_task(*in.task);
    if (!t.ok()) return field_error("task", t.status(), field);
    if (*t != implied)
        return field_error("task",
                           std::string("task ") + task_name(*t) + " does not fit the inputs: " +
                               (*t == Task::kFl2va    ? "fl2va needs first_frame and/or last_frame"
                                : *t == Task::kRef2va ? "ref2va needs at least one reference"
                                                      : "t2va takes no keyframes and no references"),
                           field);
    return *t;
}

std::string join_words(const std::vector<std::string>& words, const char* quote) {
    std::string out;
    for (const std::string& w : words) out += (out.empty() ? "" : ", ") + (quote + w + quote);
    return out;
}

std::string vocabulary_warning(const std::vector<std::string>& unknown, const std::vector<std::string>& vocab,
                               const std::string& path) {
    return "prompt: " + std::string(unknown.size() == 1 ? "the word " : "the words ") +
           join_words(unknown, "'") + (unknown.size() == 1 ? " is" : " are") +
           " outside the vocabulary this checkpoint's captions were written in (" + path +
           "), so the clip will not follow " + (unknown.size() == 1 ? "it" : "them") +
           "; the words it knows: " + join_words(vocab, "");
}

} // namespace

Status parse_size(const std::string& text, int& width, int& height) {
    const auto bad = [&] {
        // two numbers written another way ("1344X768", "1344*768", "1344 x 768"): suggest them as WxH
        std::vector<std::string> numbers(1);
        for (char c : text) {
            if (std::isdigit(static_cast<unsigned char>(c)))
                numbers.back() += c;
            else if (!numbers.back().empty())
                numbers.emplace_back();
        }
        if (numbers.back().empty()) numbers.pop_back();
        const bool two = numbers.size() == 2 && numbers[0].size() <= 6 && numbers[1].size() <= 6;
        return invalid_argument("size '" + text + "' must look like 1344x768 (whole pixels, WxH)" +
                                (two ? "; did you mean " + numbers[0] + "x" + numbers[1] + "?" : ""));
    };
    const auto p = text.find('x');
    if (p == std::string::npos || p == 0 || p + 1 >= text.size()) return bad();
    const auto digits = [](const std::string& s) {
        return !s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    const std::string w = text.substr(0, p), h = text.substr(p + 1);
    if (!digits(w) || !digits(h)) return bad();
    width = std::stoi(w);
    height = std::stoi(h);
    return ok_status();
}

Status prepare_outputs(const OutputRequest& outputs, std::string* field) {
    const MediaTargets& m = outputs.media;
    for (const std::string* path : {&m.mp4, &m.wav}) {
        if (path->empty()) continue;
        const bool mp4 = path == &m.mp4;
        if (Status s = io::prepare_output_path(
                *path, {.extensions = {mp4 ? ".mp4" : ".wav"}, .what = mp4 ? "an MP4 file" : "a WAV file"});
            !s.ok())
            return field_error("output", s, field);
    }
    if (!m.png_dir.empty()) {
        if (auto k = checked_output_kind(m.png_dir); !k.ok()) return field_error("output", k.status(), field);
        if (Status s = io::prepare_output_path(m.png_dir, {.kind = io::OutputPathKind::kDirectory}); !s.ok())
            return field_error("output", s, field);
    }
    if (!outputs.latents.empty()) {
        if (Status s = io::prepare_output_path(outputs.latents, {.refused = {".mp4", ".wav", ".json", ".png"},
                                                                 .what = "a safetensors file of latents"});
            !s.ok())
            return field_error("save_latents", s, field);
    }
    return ok_status();
}

Result<cache::CacheSpec> resolve_cache_choice(const nlohmann::json& cache, const std::string& quality,
                                              std::string* field) {
    const bool has_cache = !cache.is_null();
    if (has_cache && !quality.empty())
        return field_error("cache", "give cache or quality, not both (one cache per request)", field);
    if (has_cache) {
        auto spec = cache::parse_cache_json(cache);
        if (!spec.ok()) return field_error("cache", spec.status(), field);
        return spec;
    }
    if (!quality.empty()) {
        auto spec = cache::quality_preset(quality);
        if (!spec.ok()) return field_error("quality", spec.status(), field);
        return spec;
    }
    return cache::CacheSpec{};
}

Status check_cache(const cache::CacheSpec& spec, int steps, const model::DitConfig& config) {
    cache::StepCacheSetup cs{.steps = steps - 1,
                             .num_layers = config.num_layers,
                             .teacache_coefficients = cache::teacache_coefficients_for(config)};
    auto probe = cache::make_step_cache(spec, cs);
    if (probe.ok()) return ok_status();
    const Status& s = probe.status();
    if (s.message().rfind("cache", 0) == 0) return s;
    return Status(s.code(), "cache: " + s.message());
}

JobBuilder::JobBuilder(runtime::CheckpointInfo info, JobBuilderOptions options)
    : info_(std::move(info)), options_(options) {}

Status JobBuilder::check(const JobInput& in, const JobBuilderOptions& o, std::string* field) {
    std::string f;
    Status s = check_fields(in, o, &f);
    if (field) *field = f;
    return f.empty() ? s : s.with_field(f);
}

Status JobBuilder::check_fields(const JobInput& in, const JobBuilderOptions& o, std::string* field) {
    // ---- conditioning
    if (in.prompt && in.prompt->empty())
        return field_error("prompt", "is required and must not be empty", field);
    if (conditioning_sources(in) == 0)
        return field_error("prompt", "is required (or prompt_embeds: precomputed conditioner rows)", field);
    if (conditioning_sources(in) > 1)
        return field_error(in.prompt_embeds ? "prompt_embeds" : "random_prompt_embeds",
                           "give one of prompt, prompt_embeds and random_prompt_embeds", field);
    if (in.prompt && o.max_prompt_bytes > 0 && in.prompt->size() > o.max_prompt_bytes)
        return field_error("prompt",
                           "is " + std::to_string(in.prompt->size()) + " bytes, at most " +
                               std::to_string(o.max_prompt_bytes) + " are accepted",
                           field);
    if (in.random_prompt_embeds && (*in.random_prompt_embeds < 1 || *in.random_prompt_embeds > 65536))
        return field_error("random_prompt_embeds", "random_prompt_embeds must lie in [1, 65536]", field);
    // ---- geometry fields
    if (in.size && in.aspect)
        return field_error("aspect", "size and aspect are exclusive: give one of them", field);
    if (in.frames && in.seconds)
        return field_error("frames", "frames and seconds are exclusive: give one of them", field);
    if (in.size) {
        int w = 0, h = 0;
        if (Status s = parse_size(*in.size, w, h); !s.ok()) return field_error("size", s, field);
    }
    if (in.aspect) {
        double a = 0, b = 0;
        if (Status s = parse_aspect(*in.aspect, a, b); !s.ok()) return field_error("aspect", s, field);
    }
    if (in.seconds && !std::isfinite(*in.seconds))
        return field_error("seconds", "must be a number of seconds", field);
    // ---- task inputs
    if (has_keyframes(in) && !in.references.empty())
        return field_error(
            "reference", "references (ref2va) cannot be combined with first_frame/last_frame (fl2va)", field);
    if (has_keyframes(in) && in.aspect)
        return field_error(
            "aspect",
            "aspect does not apply with keyframes: the canvas comes from the first keyframe unless "
            "size is given",
            field);
    if (!in.references.empty()) {
        if (!in.prompt)
            return field_error("prompt",
                               "prompt is required with references (ref2va): they are presented to the text "
                               "encoder with it",
                               field);
        if (Status s = validate_references(in.references); !s.ok()) return field_error("reference", s, field);
    }
    {
        std::string tf;
        auto t = task_of(in, &tf);
        if (!t.ok()) return field_error(tf, t.status(), field);
    }
    // ---- steps and cache
    if (in.num_inference_steps) {
        const int64_t n = *in.num_inference_steps;
        if (n < 2 || n > o.max_steps)
            return field_error("num_inference_steps",
                               "num_inference_steps " + std::to_string(n) + " must lie in [2, " +
                                   std::to_string(o.max_steps) + "]",
                               field);
    }
    if (in.quality && in.quality->empty())
        return field_error("quality", "must be lossless or high, got ''", field);
    H3_TRY(check_lora_input(in.adapters, field));
    auto spec = resolve_cache_choice(in.cache.value_or(nlohmann::json()), in.quality.value_or(""), field);
    if (!spec.ok()) return spec.status();
    return check_attention_field(in, field);
}

Result<GenerationJob> JobBuilder::build(JobInput in, std::string* field) const {
    std::string f;
    std::optional<JobInput> source;
    if (options_.keep_source) source = in;
    Result<GenerationJob> r = build_job(std::move(in), &f);
    if (field) *field = f;
    if (r.ok() && source) {
        source->seed = r->seed;
        r->source = std::make_shared<const JobInput>(std::move(*source));
    }
    if (!r.ok() && !f.empty()) return r.status().with_field(f);
    return r;
}

Result<GenerationJob> JobBuilder::build_job(JobInput in, std::string* field) const {
    H3_TRY(check(in, options_, field));
    const model::LatentSpec& spec = info_.spec;
    GenerationJob job;
    H3_ASSIGN_OR_RETURN(job.task, task_of(in, field));

    // ---- the DiT the task runs on
    const Component dit = job.task == Task::kRef2va ? Component::kTransformerRef : Component::kTransformer;
    if (!info_.has(dit)) {
        return job.task == Task::kRef2va
                   ? field_error("reference",
                                 "reference: checkpoint " + info_.root +
                                     " has no transformer_ref/ (the Ref2VA DiT that ref2va requests run on)",
                                 field)
                   : field_error("task",
                                 "task " + std::string(task_name(job.task)) + ": checkpoint " + info_.root +
                                     " has no transformer/ (the FL2VA DiT that t2va and fl2va run on)",
                                 field);
    }

    // ---- conditioning
    if (in.prompt) {
        job.prompt = *in.prompt;
        if (!info_.has(Component::kTextEncoder))
            return field_error("prompt",
                               bad_input("prompt: checkpoint " + info_.root +
                                         " has no text encoder + tokenizer (text_encoder/ with weights and "
                                         "tokenizer/); give prompt_embeds (a precomputed [L, text_dim] "
                                         "conditioner output) instead"),
                               field);
    } else if (in.prompt_embeds) {
        const Tensor& e = in.prompt_embeds->embeddings;
        if (!e.defined() || e.rank() != 2 || e.dim(1) != spec.text_dim)
            return field_error("prompt_embeds",
                               bad_input("prompt_embeds " + in.prompt_embeds_source + " must be [L, " +
                                         std::to_string(spec.text_dim) +
                                         "] (the checkpoint's text_dim), got " +
                                         (e.defined() ? e.describe() : "none")),
                               field);
        job.prompt_embeds = std::move(in.prompt_embeds);
        job.prompt_embeds_source = in.prompt_embeds_source;
    } else {
        job.random_prompt_rows = static_cast<int>(*in.random_prompt_embeds);
    }

    // ---- geometry (and the keyframes' canvas)
    GeometryRequest gr;
    gr.limits = options_.geometry;
    if (in.size) {
        int w = 0, h = 0;
        H3_TRY(parse_size(*in.size, w, h));
        gr.width = w;
        gr.height = h;
    }
    if (in.aspect) {
        double a = 0, b = 0;
        H3_TRY(parse_aspect(*in.aspect, a, b));
        gr.aspect_w = a;
        gr.aspect_h = b;
    }
    if (in.frames) gr.frames = static_cast<int>(std::clamp<int64_t>(*in.frames, -1, 1 << 30));
    gr.seconds = in.seconds;
    // ---- the checkpoint's own defaults (h3_defaults.json) for what the request leaves out; fl2va's canvas
    // comes from its keyframes
    std::string filled;
    const auto note = [&](const std::string& what) { filled += (filled.empty() ? "" : ", ") + what; };
    if (const auto& d = info_.defaults) {
        if (d->size && !in.size && !in.aspect && job.task != Task::kFl2va) {
            int w = 0, h = 0;
            if (Status s = parse_size(*d->size, w, h); !s.ok())
                return bad_input(d->path + ": " + s.message());
            gr.width = w;
            gr.height = h;
            note("size " + *d->size);
        }
        if (d->frames && !in.frames && !in.seconds) {
            gr.frames = static_cast<int>(*d->frames);
            note("frames " + std::to_string(*d->frames));
        }
    }
    if (job.task == Task::kFl2va) {
        KeyframeRequest kr;
        if (in.first_frame) kr.first = &in.first_frame->image;
        if (in.last_frame) kr.last = &in.last_frame->image;
        kr.canvas_multiple = spec.canvas_multiple();
        const char* lead = in.first_frame ? "first_frame" : "last_frame";
        if (gr.width) {
            auto c = canvas_from_size(*gr.width, *gr.height, spec.canvas_multiple());
            if (!c.ok()) return field_error("size", c.status(), field);
            kr.canvas = *c;
        }
        auto kf = prepare_keyframes(kr);
        if (!kf.ok()) return field_error(kr.canvas ? "size" : lead, kf.status(), field);
        gr.width = kf->canvas.width;
        gr.height = kf->canvas.height;
        for (auto [name, im] :
             {std::pair{"first_frame", &in.first_frame}, std::pair{"last_frame", &in.last_frame}})
            if (*im)
                job.keyframe_sources.push_back(std::string(name) + ": " + std::to_string((*im)->image.width) +
                                               "x" + std::to_string((*im)->image.height) + " " +
                                               io::image_format_name((*im)->format));
        job.keyframes = std::make_shared<const PreparedKeyframes>(std::move(kf).value());
    }
    {
        std::string gf;
        auto g = resolve_geometry(gr, spec, &gf);
        if (!g.ok() && !filled.empty() && ((gf == "size" && !in.size) || (gf == "frames" && !in.frames)))
            return field_error(gf,
                               bad_input(gf + ": the checkpoint's default from " + info_.defaults->path +
                                         " does not fit: " + g.status().message()),
                               field);
        if (!g.ok()) {
            if (job.task == Task::kFl2va && gf == "size" && !in.size)
                gf = in.first_frame ? "first_frame" : "last_frame";
            return field_error(gf, g.status(), field);
        }
        job.geometry = *g;
    }

    // ---- references, normalized for the clip
    if (job.task == Task::kRef2va) {
        auto norm = normalize_references(in.references, {.num_frames = job.geometry.frames,
                                                         .spec = spec,
                                                         .image_short_edge = options_.reference_image_edge,
                                                         .video_short_edge = options_.reference_video_edge});
        if (!norm.ok()) return field_error("reference", norm.status(), field);
        for (size_t i = 0; i < in.references.size(); ++i)
            job.reference_sources.push_back(describe_reference(i, in.references[i]));
        job.references = std::make_shared<const std::vector<NormalizedReference>>(std::move(norm).value());
    }
    if (job.presents_images() && !info_.has(Component::kVisionTower))
        return field_error(job.task == Task::kRef2va ? "reference"
                                                     : (in.first_frame ? "first_frame" : "last_frame"),
                           unimplemented("the text encoder of " + info_.root +
                                         " has no Qwen3-VL vision tower (no vision_config / model.visual.* "
                                         "weights) to present the images to"),
                           field);

    // ---- sampling
    int default_steps = kDefaultInferenceSteps;
    if (info_.defaults && info_.defaults->num_inference_steps && !in.num_inference_steps && !info_.fasth3 &&
        !in.adapters.preset) { // a FastH3 contract's or a preset's steps come first
        default_steps = static_cast<int>(*info_.defaults->num_inference_steps);
        note("num_inference_steps " + std::to_string(default_steps));
    }
    job.checkpoint_defaults = filled;
    job.steps = static_cast<int>(in.num_inference_steps.value_or(default_steps));
    if (auto s = make_schedule(job.steps, 1.0); !s.ok())
        return field_error("num_inference_steps", s.status(), field);
    if (in.seed) {
        job.seed = *in.seed;
        job.seed_given = true;
    } else {
        std::random_device rd;
        job.seed = (static_cast<uint64_t>(rd()) << 32 | rd()) & ((1ull << 53) - 1); // exact in JSON
    }
    H3_TRY(
        resolve_job_attention(in, info_, job, field)); // FastH3: may set the steps (before the cache check)
    job.video_shift = info_.video_shift.value_or(kDefaultVideoShift);
    job.audio_shift = info_.audio_shift.value_or(kDefaultAudioShift);
    H3_TRY(apply_lora_input(in.adapters, in.num_inference_steps.has_value(), options_.lora, job, field));
    job.quality = in.quality.value_or("");
    H3_ASSIGN_OR_RETURN(job.cache,
                        resolve_cache_choice(in.cache.value_or(nlohmann::json()), job.quality, field));
    if (info_.dit) {
        if (Status s = check_cache(job.cache, job.steps, *info_.dit); !s.ok())
            return field_error("cache", s, field);
    }
    if (info_.dit) {
        job.dit_flops = job_dit_flops(job, *info_.dit);
        if (options_.flops_per_second > 0) job.estimated_seconds = job.dit_flops / options_.flops_per_second;
    }
    if (info_.defaults && !job.prompt.empty()) {
        const std::vector<std::string>& vocab = info_.defaults->vocabulary;
        const std::vector<std::string> unknown = runtime::words_outside_vocabulary(job.prompt, vocab);
        if (!unknown.empty())
            job.warnings.push_back(vocabulary_warning(unknown, vocab, info_.defaults->path));
    }
    if (options_.prepare_outputs) H3_TRY(prepare_outputs(in.outputs, field));
    job.outputs = std::move(in.outputs);
    return job;
}

} // namespace h3::pipeline
