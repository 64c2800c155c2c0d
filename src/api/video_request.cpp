#include "api/video_request.h"

#include "io/json_file.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

namespace h3::api {

namespace {

// Prefixes the field name unless the message already starts with it.
Status field_error(const std::string& field, const Status& s, std::string* bad_field) {
    if (bad_field) *bad_field = field;
    if (s.message().rfind(field, 0) == 0) return s;
    return Status(s.code(), field + ": " + s.message());
}

Status field_error(const std::string& field, const std::string& message, std::string* bad_field) {
    return field_error(field, invalid_argument(message), bad_field);
}

const char* type_name(const nlohmann::json& v) {
    return v.type_name();
}

// A whole number in a JSON number (or, for OpenAI clients, a numeric string).
bool as_number(const nlohmann::json& v, double& out) {
    if (v.is_number()) {
        out = v.get<double>();
        return true;
    }
    if (v.is_string()) {
        const std::string s = v.get<std::string>();
        if (s.empty()) return false;
        char* end = nullptr;
        out = std::strtod(s.c_str(), &end);
        return end == s.c_str() + s.size();
    }
    return false;
}

} // namespace

const char* output_format_name(OutputFormat f) {
    return f == OutputFormat::kWav ? "wav" : "mp4";
}

const char* output_content_type(OutputFormat f) {
    return f == OutputFormat::kWav ? "audio/wav" : "video/mp4";
}

Result<OutputFormat> parse_output_format(const std::string& name) {
    if (name == "mp4") return OutputFormat::kMp4;
    if (name == "wav") return OutputFormat::kWav;
    return invalid_argument("output_format must be mp4 or wav, got '" + name + "'");
}

Status parse_size(const std::string& text, const std::string& field, int& width, int& height) {
    const auto bad = [&] {
        return invalid_argument(field + " '" + text + "' must look like 1344x768 (whole pixels)");
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
                                              std::string* bad_field) {
    const bool has_cache = !cache.is_null();
    if (has_cache && !quality.empty())
        return field_error("cache", "give cache or quality, not both (one cache per request)", bad_field);
    if (has_cache) {
        auto spec = cache::parse_cache_json(cache);
        if (!spec.ok()) return field_error("cache", spec.status(), bad_field);
        return spec;
    }
    if (!quality.empty()) {
        auto spec = cache::quality_preset(quality);
        if (!spec.ok()) return field_error("quality", spec.status(), bad_field);
        return spec;
    }
    return cache::CacheSpec{};
}

nlohmann::json VideoRequest::to_json() const {
    nlohmann::json j;
    j["prompt"] = prompt;
    j["model"] = model;
    if (generation.geometry.seconds) j["seconds"] = *generation.geometry.seconds;
    j["size"] = std::to_string(geometry.width) + "x" + std::to_string(geometry.height);
    j["seed"] = generation.seed;
    j["num_inference_steps"] = generation.steps;
    if (!quality.empty()) j["quality"] = quality;
    j["cache"] = generation.cache.describe();
    j["output_format"] = output_format_name(output_format);
    if (!keyframe_sources.empty()) j["keyframes"] = keyframe_sources;
    if (!reference_sources.empty()) j["references"] = reference_sources;
    return j;
}

Result<VideoRequest> parse_video_request(const nlohmann::json& body, const VideoRequestLimits& limits,
                                         std::string* bad_field) {
    if (!body.is_object())
        return field_error("body", std::string("must be a JSON object, got ") + type_name(body), bad_field);
    static const std::set<std::string> known = {"prompt", "model",         "seconds",
                                                "size",   "seed",          "quality",
                                                "cache",  "output_format", "num_inference_steps"};
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (it.key() == "prompt_embeds")
            return field_error("prompt_embeds", "is not accepted from clients (send a prompt)", bad_field);
        if (!known.count(it.key()))
            return field_error(it.key().empty() ? std::string("\"\"") : it.key(), // an empty key is named too
                               "unknown field (accepted: prompt, model, seconds, size, seed, "
                               "num_inference_steps, quality, cache, output_format)",
                               bad_field);
    }
    VideoRequest rq;
    const auto string_field = [&](const char* name, std::string& out) -> Status {
        auto it = body.find(name);
        if (it == body.end() || it->is_null()) return ok_status();
        if (!it->is_string())
            return field_error(name, std::string("must be a string, got ") + type_name(*it), bad_field);
        out = it->get<std::string>();
        return ok_status();
    };

    // prompt
    H3_TRY(string_field("prompt", rq.prompt));
    if (rq.prompt.empty()) return field_error("prompt", "is required and must not be empty", bad_field);
    if (rq.prompt.size() > limits.max_prompt_bytes)
        return field_error("prompt",
                           "is " + std::to_string(rq.prompt.size()) + " bytes, at most " +
                               std::to_string(limits.max_prompt_bytes) + " are accepted",
                           bad_field);
    H3_TRY(string_field("model", rq.model));

    // size and seconds → geometry
    rq.generation.geometry.limits = limits.geometry;
    if (auto it = body.find("size"); it != body.end() && !it->is_null()) {
        if (!it->is_string())
            return field_error(
                "size", std::string("must be a string like \"1344x768\", got ") + type_name(*it), bad_field);
        int w = 0, h = 0;
        if (Status s = parse_size(it->get<std::string>(), "size", w, h); !s.ok())
            return field_error("size", s, bad_field);
        rq.generation.geometry.width = w;
        rq.generation.geometry.height = h;
    }
    if (auto it = body.find("seconds"); it != body.end() && !it->is_null()) {
        double s = 0;
        if (!as_number(*it, s) || !std::isfinite(s))
            return field_error("seconds", std::string("must be a number of seconds, got ") + it->dump(),
                               bad_field);
        rq.generation.geometry.seconds = s;
    }
    {
        auto g = pipeline::resolve_geometry(rq.generation.geometry);
        if (!g.ok()) {
            const std::string& m = g.status().message();
            const bool about_time =
                m.find("seconds") != std::string::npos || m.find("frames") != std::string::npos;
            return field_error(about_time ? "seconds" : "size", g.status(), bad_field);
        }
        rq.geometry = *g;
    }

    // seed
    if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
        if (!it->is_number_unsigned()) // JSON parsers store non-negative integers as unsigned
            return field_error("seed", "must be a non-negative integer, got " + it->dump(), bad_field);
        rq.generation.seed = it->get<uint64_t>();
        rq.seed_given = true;
    } else {
        std::random_device rd;
        rq.generation.seed = (static_cast<uint64_t>(rd()) << 32 | rd()) & ((1ull << 53) - 1); // exact in JSON
    }

    // num_inference_steps
    if (auto it = body.find("num_inference_steps"); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer())
            return field_error("num_inference_steps", "must be an integer, got " + it->dump(), bad_field);
        const int64_t n = it->get<int64_t>();
        if (n < 2 || n > limits.max_steps)
            return field_error("num_inference_steps",
                               "num_inference_steps " + std::to_string(n) + " must lie in [2, " +
                                   std::to_string(limits.max_steps) + "]",
                               bad_field);
        rq.generation.steps = static_cast<int>(n);
    }
    if (auto s = pipeline::make_schedule(rq.generation.steps, 1.0); !s.ok())
        return field_error("num_inference_steps", s.status(), bad_field);

    // cache / quality
    H3_TRY(string_field("quality", rq.quality));
    if (auto it = body.find("quality"); it != body.end() && it->is_string() && rq.quality.empty())
        return field_error("quality", "must be lossless or high, got ''", bad_field);
    {
        const auto it = body.find("cache");
        auto spec = resolve_cache_choice(it == body.end() ? nlohmann::json() : *it, rq.quality, bad_field);
        if (!spec.ok()) return spec.status();
        rq.generation.cache = *spec;
    }

    // output_format
    std::string format;
    H3_TRY(string_field("output_format", format));
    if (!format.empty()) {
        auto f = parse_output_format(format);
        if (!f.ok()) return field_error("output_format", f.status(), bad_field);
        rq.output_format = *f;
    }
    return rq;
}

Status attach_keyframes(VideoRequest& rq, const io::DecodedImage* first_frame,
                        const io::DecodedImage* last_frame, std::string* bad_field) {
    pipeline::KeyframeRequest kr;
    if (first_frame) kr.first = &first_frame->image;
    if (last_frame) kr.last = &last_frame->image;
    const char* lead = first_frame ? "first_frame" : "last_frame";
    pipeline::GeometryRequest& g = rq.generation.geometry;
    if (g.width && g.height) kr.canvas = pipeline::Canvas{*g.width, *g.height};
    auto kf = pipeline::prepare_keyframes(kr);
    if (!kf.ok()) return field_error(kr.canvas ? "size" : lead, kf.status(), bad_field);
    g.width = kf->canvas.width;
    g.height = kf->canvas.height;
    g.aspect_w.reset();
    g.aspect_h.reset();
    auto geo = pipeline::resolve_geometry(g);
    if (!geo.ok()) return field_error(kr.canvas ? "size" : lead, geo.status(), bad_field);
    rq.geometry = *geo;
    rq.keyframe_sources.clear();
    for (auto [name, im] : {std::pair{"first_frame", first_frame}, std::pair{"last_frame", last_frame}})
        if (im)
            rq.keyframe_sources.push_back(std::string(name) + ": " + std::to_string(im->image.width) + "x" +
                                          std::to_string(im->image.height) + " " +
                                          io::image_format_name(im->format));
    rq.keyframes = std::make_shared<const pipeline::PreparedKeyframes>(std::move(kf).value());
    return ok_status();
}

Status attach_references(VideoRequest& rq, const std::vector<pipeline::ReferenceMedia>& refs,
                         const VideoRequestLimits& limits, std::string* bad_field) {
    if (rq.keyframes) {
        if (bad_field) *bad_field = "reference";
        return invalid_argument(
            "reference: references (ref2va) cannot be combined with first_frame/last_frame "
            "(fl2va)");
    }
    if (Status s = pipeline::validate_references(refs); !s.ok())
        return field_error("reference", s, bad_field);
    auto norm = pipeline::normalize_references(refs, {.num_frames = rq.geometry.frames,
                                                      .image_short_edge = limits.reference_image_edge,
                                                      .video_short_edge = limits.reference_video_edge});
    if (!norm.ok()) return field_error("reference", norm.status(), bad_field);
    rq.reference_sources.clear();
    for (size_t i = 0; i < refs.size(); ++i) {
        const pipeline::ReferenceMedia& r = refs[i];
        std::string d = "reference " + std::to_string(i + 1) + ": " + pipeline::reference_kind_name(r.kind);
        if (r.kind == pipeline::ReferenceKind::kImage)
            d += " " + std::to_string(r.image.width) + "x" + std::to_string(r.image.height);
        if (r.kind == pipeline::ReferenceKind::kVideo)
            d += " " + std::to_string(r.frames.dim(2)) + "x" + std::to_string(r.frames.dim(1));
        if (r.kind != pipeline::ReferenceKind::kImage) {
            char buf[32];
            std::snprintf(buf, sizeof buf, ", %.2f s", r.clip_seconds());
            d += buf;
        }
        if (r.kind == pipeline::ReferenceKind::kVideo && r.has_audio()) d += ", with audio";
        rq.reference_sources.push_back(d);
    }
    rq.references =
        std::make_shared<const std::vector<pipeline::NormalizedReference>>(std::move(norm).value());
    return ok_status();
}

Result<VideoRequest> parse_video_request_text(std::string_view body, const VideoRequestLimits& limits,
                                              std::string* bad_field) {
    // bounded nesting: a deeply nested body is refused before anything recurses over it
    auto j = io::parse_json(body, "body");
    if (!j.ok()) {
        if (bad_field) *bad_field = "body";
        return invalid_argument(j.status().message());
    }
    return parse_video_request(*j, limits, bad_field);
}

} // namespace h3::api
