#include "pipeline/job_builder.h"

#include "cache/step_cache.h"
#include "pipeline/job_attention.h"
#include "pipeline/schedule.h"

#include <algorithm>
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

} // namespace

Status parse_size(const std::string& text, int& width, int& height) {
    const auto bad = [&] {
        return invalid_argument("size '" + text + "' must look like 1344x768 (whole pixels)");
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
    Result<GenerationJob> r = build_job(std::move(in), &f);
    if (field) *field = f;
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
    job.steps = static_cast<int>(in.num_inference_steps.value_or(50));
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
    job.outputs = std::move(in.outputs);
    return job;
}

} // namespace h3::pipeline
