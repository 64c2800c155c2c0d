// The body of a submission (POST /v1/videos, /v1/videos/sync) → a built VideoRequest, without HTTP: a
// JSON object, or multipart/form-data as the OpenAI SDK posts it (text fields with the JSON schema's names,
// `cache` may carry JSON; file parts `first_frame`/`last_frame` (fl2va keyframes, decoded as images) and
// repeated `reference` parts (ref2va: images, videos, audio; media go through fresh private temporary files,
// never a client-chosen name)). Every JSON parse is depth-bounded (io::parse_json); text that is not UTF-8 is
// refused naming the field. The fields go through the wire schema (serve/wire) and the one
// pipeline::JobBuilder. Errors name the field in `bad_field` (the API's `param`).
#pragma once

#include "core/status.h"
#include "pipeline/job_builder.h"
#include "pipeline/reference_files.h"
#include "serve/wire/video_request.h"

#include <string>
#include <string_view>

namespace h3::serve {

struct SubmissionLimits {
    api::WireLimits request;
    pipeline::ReferenceReadLimits reference; // per `reference` part
    size_t max_parts = 64;                   // multipart parts in one body
};

// The body's fields and uploads, before the builder. `content_type` decides between multipart
// (multipart/form-data; boundary=...) and JSON (anything else).
Result<api::WireRequest> read_submission(std::string_view content_type, std::string_view body,
                                         const SubmissionLimits& limits, std::string& bad_field);

// The body through the one job builder (inline: read_submission links without the builder, as the fuzz
// targets do).
inline Result<api::VideoRequest> parse_submission(std::string_view content_type, std::string_view body,
                                                  const SubmissionLimits& limits,
                                                  const pipeline::JobBuilder& builder,
                                                  std::string& bad_field) {
    H3_ASSIGN_OR_RETURN(api::WireRequest wire, read_submission(content_type, body, limits, bad_field));
    return api::build_video_request(std::move(wire), builder, &bad_field);
}

} // namespace h3::serve
