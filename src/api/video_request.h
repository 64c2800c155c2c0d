// The wire schema of a video job request (POST /v1/videos, OpenAI-style), without HTTP: a JSON body is
// parsed and validated into a VideoRequest before anything is queued. Every error names its field
// (`bad_field` receives it for the API's `param`); unknown fields are rejected. Geometry goes through
// pipeline::resolve_geometry, the step count through pipeline::make_schedule, `cache` through
// cache::parse_cache_json and `quality` through cache::quality_preset (the two are exclusive). The checks
// that need the checkpoint (cache against the block count) are the engine's (api/engine.h).
#pragma once

#include "core/status.h"
#include "io/image_reader.h"
#include "pipeline/generate.h"
#include "pipeline/keyframe_image.h"
#include "pipeline/references.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace h3::api {

enum class OutputFormat { kMp4, kWav };
const char* output_format_name(OutputFormat f);  // "mp4", "wav"
const char* output_content_type(OutputFormat f); // "video/mp4", "audio/wav"
Result<OutputFormat> parse_output_format(const std::string& name);

struct VideoRequestLimits {
    size_t max_prompt_bytes = 16 * 1024;
    int max_steps = 1000;
    pipeline::GeometryLimits geometry = {};
    io::ImageLimits image = {};   // keyframe uploads (first_frame, last_frame)
    int max_reference_parts = 12; // `reference` uploads (the ref2va rules then apply)
    // ref2va reference resolutions (pipeline::NormalizeOptions): the model's 2048 / 768 unless the server was
    // started in the reduced-cost mode
    int reference_image_edge = 2048, reference_video_edge = 768;
};

struct VideoRequest {
    std::string prompt;
    std::string model = "minimax-h3";       // echoed in the video object
    pipeline::GenerationRequest generation; // geometry request, steps, seed, cache
    pipeline::Geometry geometry;            // resolved from generation.geometry
    std::string quality;                    // "" (not given), lossless or high
    OutputFormat output_format = OutputFormat::kMp4;
    bool seed_given = false; // false: the server drew the seed (it is still reported)
    // fl2va: the keyframes on the canvas, packed order (set by attach_keyframes); null for t2va. Held in
    // memory with the job only: the job record keeps their anchors and sizes, never the pixels.
    std::shared_ptr<const pipeline::PreparedKeyframes> keyframes;
    std::vector<std::string> keyframe_sources; // per keyframe: "first_frame: 640x480 png" (the record)
    // ref2va: the normalized references in upload order (set by attach_references); null otherwise. Held in
    // memory with the job only, like the keyframes.
    std::shared_ptr<const std::vector<pipeline::NormalizedReference>> references;
    std::vector<std::string> reference_sources; // per reference: "reference 1: video 640x360, 3.00 s, audio"

    // The canonical form (what was asked, defaults filled in), stored in the job record.
    nlohmann::json to_json() const;
};

// Validates one request body. The seed, when absent, is drawn from std::random_device.
Result<VideoRequest> parse_video_request(const nlohmann::json& body, const VideoRequestLimits& limits = {},
                                         std::string* bad_field = nullptr);
// The same from the raw body text ("body" is the field of a JSON syntax error).
Result<VideoRequest> parse_video_request_text(std::string_view body, const VideoRequestLimits& limits = {},
                                              std::string* bad_field = nullptr);

// fl2va: the decoded keyframes of a parsed request (either or both) are put onto the canvas — the request's
// `size` when given, else the canvas of the first keyframe's aspect — and the request's geometry becomes that
// canvas (`seconds` kept). Errors name the field (first_frame, last_frame, size).
Status attach_keyframes(VideoRequest& request, const io::DecodedImage* first_frame,
                        const io::DecodedImage* last_frame, std::string* bad_field = nullptr);

// ref2va: the decoded references (upload order) are checked against the rules (pipeline/references) and
// normalized for the request's frame count; the canvas stays the request's (16:9 unless `size`/`aspect`).
// Errors name the field "reference".
Status attach_references(VideoRequest& request, const std::vector<pipeline::ReferenceMedia>& references,
                         const VideoRequestLimits& limits = {}, std::string* bad_field = nullptr);

// "WxH" with whole positive pixel counts; `field` names the option in the message ("size", "--size").
Status parse_size(const std::string& text, const std::string& field, int& width, int& height);

// `cache` (a spec string or {"kind": {...}} JSON; null when absent) or `quality`, never both; neither gives
// the lossless default. Errors name the field.
Result<cache::CacheSpec> resolve_cache_choice(const nlohmann::json& cache, const std::string& quality,
                                              std::string* bad_field = nullptr);

} // namespace h3::api
