// The wire schema of a video job request (POST /v1/videos, OpenAI-style), without HTTP: a JSON body (or the
// multipart form's fields) → the job builder's input (pipeline::JobInput: types checked, unknown fields and
// those clients may not send refused) → through the one pipeline::JobBuilder → a VideoRequest. Every error
// names its field (`bad_field` receives it for the API's `param`). The uploads (keyframes, references) are
// decoded by the HTTP layer and added to the input before it is built.
#pragma once

#include "core/status.h"
#include "io/image_reader.h"
#include "pipeline/job_builder.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace h3::api {

// mp4: H.264 + AAC (and its audio track as a WAV); wav: the audio alone; latents: the denoised latents as the
// safetensors `h3-engine generate --save-latents` writes (nothing is decoded).
enum class OutputFormat { kMp4, kWav, kLatents };
const char* output_format_name(OutputFormat f);  // "mp4", "wav", "latents"
const char* output_content_type(OutputFormat f); // "video/mp4", "audio/wav", "application/octet-stream"
Result<OutputFormat> parse_output_format(const std::string& name);

// The upload limits of the wire (the job's own limits are the builder's options).
struct WireLimits {
    io::ImageLimits image = {};   // keyframe uploads (first_frame, last_frame)
    int max_reference_parts = 12; // `reference` uploads (the ref2va rules then apply)
};

// One submission's fields before the builder: the job input and what only the wire carries.
struct WireRequest {
    pipeline::JobInput input;
    std::string model = "minimax-h3"; // echoed in the video object
    OutputFormat output_format = OutputFormat::kMp4;
};

struct VideoRequest {
    pipeline::GenerationJob job;
    std::string model = "minimax-h3";
    OutputFormat output_format = OutputFormat::kMp4;
    // The canonical form (what was asked, defaults filled in), stored in the job record.
    nlohmann::json to_json() const;
};

// The body's fields (a JSON object; numbers may come as numeric strings, as OpenAI clients send them).
Result<WireRequest> read_video_body(const nlohmann::json& body, std::string* bad_field = nullptr);
// The same from the raw body text ("body" is the field of a JSON syntax error).
Result<WireRequest> read_video_body_text(std::string_view body, std::string* bad_field = nullptr);
// The request through the builder (keyframes and references already in `wire.input`). Inline: the parsing
// above links without the builder (the fuzz targets).
inline Result<VideoRequest> build_video_request(WireRequest wire, const pipeline::JobBuilder& builder,
                                                std::string* bad_field = nullptr) {
    // a missing prompt is the API's error, whatever else the form carried
    if (!wire.input.prompt) {
        if (bad_field) *bad_field = "prompt";
        return invalid_argument("prompt: is required and must not be empty");
    }
    VideoRequest rq;
    rq.model = std::move(wire.model);
    rq.output_format = wire.output_format;
    H3_ASSIGN_OR_RETURN(rq.job, builder.build(std::move(wire.input), bad_field));
    return rq;
}

} // namespace h3::api
