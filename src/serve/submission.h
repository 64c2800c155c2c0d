// The body of a submission (POST /v1/videos, /v1/videos/sync) → a validated VideoRequest, without HTTP: a
// JSON object, or multipart/form-data as the OpenAI SDK posts it (text fields with the JSON schema's names,
// `cache` may carry JSON; file parts `first_frame`/`last_frame` (fl2va keyframes, decoded as images) and
// repeated `reference` parts (ref2va: images, videos, audio; media go through fresh private temporary files,
// never a client-chosen name)). Every JSON parse is depth-bounded (io::parse_json); text that is not UTF-8 is
// refused naming the field. Errors name the field in `bad_field` (the API's `param`).
#pragma once

#include "api/video_request.h"
#include "core/status.h"
#include "pipeline/reference_files.h"

#include <functional>
#include <string>
#include <string_view>

namespace h3::serve {

struct SubmissionLimits {
    api::VideoRequestLimits request;
    pipeline::ReferenceReadLimits reference; // per `reference` part
    size_t max_parts = 64;                   // multipart parts in one body
};

// The engine's checks of a parsed request against the checkpoint (cache vs block count, transformer_ref/).
using RequestChecker = std::function<Status(const api::VideoRequest&)>;

// `content_type` decides between multipart (multipart/form-data; boundary=...) and JSON (anything else).
Result<api::VideoRequest> parse_submission(std::string_view content_type, std::string_view body,
                                           const SubmissionLimits& limits, const RequestChecker& check,
                                           std::string& bad_field);

} // namespace h3::serve
