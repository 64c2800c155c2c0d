#include "serve/wire/video_request.h"

#include "io/json_file.h"
#include "serve/wire/lora_fields.h"

#include <cmath>
#include <cstdlib>
#include <set>

namespace h3::api {

namespace {

Status field_error(const std::string& field, const std::string& message, std::string* bad_field) {
    if (bad_field) *bad_field = field;
    return invalid_argument(field + ": " + message);
}

// A number in a JSON number (or, for OpenAI clients, a numeric string).
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
    switch (f) {
    case OutputFormat::kMp4:
        return "mp4";
    case OutputFormat::kWav:
        return "wav";
    case OutputFormat::kLatents:
        return "latents";
    }
    return "mp4";
}

const char* output_content_type(OutputFormat f) {
    switch (f) {
    case OutputFormat::kMp4:
        return "video/mp4";
    case OutputFormat::kWav:
        return "audio/wav";
    case OutputFormat::kLatents:
        return "application/octet-stream";
    }
    return "application/octet-stream";
}

Result<OutputFormat> parse_output_format(const std::string& name) {
    for (OutputFormat f : {OutputFormat::kMp4, OutputFormat::kWav, OutputFormat::kLatents})
        if (name == output_format_name(f)) return f;
    return invalid_argument("output_format must be mp4, wav or latents, got '" + name + "'");
}

nlohmann::json VideoRequest::to_json() const {
    nlohmann::json j;
    j["prompt"] = job.prompt;
    j["model"] = model;
    j["task"] = pipeline::task_name(job.task);
    j["seconds"] = job.geometry.seconds();
    j["size"] = std::to_string(job.geometry.width) + "x" + std::to_string(job.geometry.height);
    j["seed"] = job.seed;
    j["num_inference_steps"] = job.steps;
    if (!job.quality.empty()) j["quality"] = job.quality;
    j["cache"] = job.cache.describe();
    j["output_format"] = output_format_name(output_format);
    j["attention"] = job.attention.describe();
    if (!job.keyframe_sources.empty()) j["keyframes"] = job.keyframe_sources;
    if (!job.reference_sources.empty()) j["references"] = job.reference_sources;
    if (!job.adapters.empty()) j["lora"] = lora_record(job.adapters);
    return j;
}

Result<WireRequest> read_video_body(const nlohmann::json& given, std::string* bad_field) {
    if (!given.is_object())
        return field_error("body", std::string("must be a JSON object, got ") + given.type_name(), bad_field);
    // documented aliases ("steps") become the canonical field names, which errors and objects report
    nlohmann::json body = given;
    for (const pipeline::FieldAlias& a : pipeline::kFieldAliases) {
        auto it = body.find(a.alias);
        if (it == body.end()) continue;
        if (body.contains(a.field))
            return field_error(a.field, std::string("given twice: '") + a.alias + "' is its alias",
                               bad_field);
        body[a.field] = *it;
        body.erase(a.alias);
    }
    static const std::set<std::string> known = {"prompt", "model",         "seconds",
                                                "size",   "seed",          "quality",
                                                "cache",  "output_format", "num_inference_steps",
                                                "lora",   "lora_strict",   "attention"};
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (it.key() == "prompt_embeds")
            return field_error("prompt_embeds", "is not accepted from clients (send a prompt)", bad_field);
        if (!known.count(it.key()))
            return field_error(
                it.key().empty() ? std::string("\"\"") : it.key(), // an empty key is named too
                "unknown field (accepted: prompt, model, seconds, size, seed, "
                "num_inference_steps (alias steps), quality, cache, output_format, lora, lora_strict, "
                "attention)",
                bad_field);
    }
    WireRequest w;
    pipeline::JobInput& in = w.input;
    const auto string_field = [&](const char* name, std::optional<std::string>& out) -> Status {
        auto it = body.find(name);
        if (it == body.end() || it->is_null()) return ok_status();
        if (!it->is_string())
            return field_error(name, std::string("must be a string, got ") + it->type_name(), bad_field);
        out = it->get<std::string>();
        return ok_status();
    };
    H3_TRY(string_field("prompt", in.prompt));
    std::optional<std::string> model, format;
    H3_TRY(string_field("model", model));
    if (model) w.model = *model;
    if (auto it = body.find("size"); it != body.end() && !it->is_null()) {
        if (!it->is_string())
            return field_error(
                "size", std::string("must be a string like \"1344x768\", got ") + it->type_name(), bad_field);
        in.size = it->get<std::string>();
    }
    if (auto it = body.find("seconds"); it != body.end() && !it->is_null()) {
        double s = 0;
        if (!as_number(*it, s) || !std::isfinite(s))
            return field_error("seconds", "must be a number of seconds, got " + it->dump(), bad_field);
        in.seconds = s;
    }
    if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
        if (!it->is_number_unsigned()) // JSON parsers store non-negative integers as unsigned
            return field_error("seed", "must be a non-negative integer, got " + it->dump(), bad_field);
        in.seed = it->get<uint64_t>();
    }
    if (auto it = body.find("num_inference_steps"); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer())
            return field_error("num_inference_steps", "must be an integer, got " + it->dump(), bad_field);
        in.num_inference_steps = it->get<int64_t>();
    }
    H3_TRY(string_field("quality", in.quality));
    if (auto it = body.find("cache"); it != body.end() && !it->is_null()) in.cache = *it;
    H3_TRY(read_lora_fields(body, in.adapters, bad_field));
    H3_TRY(string_field("attention", in.attention)); // FastH3: dense | vsa[:...] (the builder checks it)
    H3_TRY(string_field("output_format", format));
    if (format && !format->empty()) {
        auto f = parse_output_format(*format);
        if (!f.ok()) {
            if (bad_field) *bad_field = "output_format";
            return f.status();
        }
        w.output_format = *f;
    }
    return w;
}

Result<WireRequest> read_video_body_text(std::string_view body, std::string* bad_field) {
    // bounded nesting: a deeply nested body is refused before anything recurses over it
    auto j = io::parse_json(body, "body");
    if (!j.ok()) {
        if (bad_field) *bad_field = "body";
        return invalid_argument(j.status().message());
    }
    return read_video_body(*j, bad_field);
}

} // namespace h3::api
