// The video object (OpenAI-style): one job's record. The same JSON serves the API response and the on-disk
// record (job.json), which adds the fields only the server needs (submission order, start time, the
// canonical request). Timestamps are Unix seconds; 0 means "not yet" (null on the wire). A completed job's
// object names its content's URL (`url`: /v1/videos/{id}/content), so its `done` event says where it is.
#pragma once

#include "core/status.h"
#include "serve/wire/video_request.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace h3::api {

enum class JobStatus { kQueued, kInProgress, kCompleted, kFailed, kCancelled };
const char* job_status_name(JobStatus s); // queued, in_progress, completed, failed, cancelled
Result<JobStatus> parse_job_status(const std::string& name);
inline bool is_final(JobStatus s) {
    return s == JobStatus::kCompleted || s == JobStatus::kFailed || s == JobStatus::kCancelled;
}

struct JobError {
    std::string code;    // invalid_argument, out_of_memory, cancelled, interrupted, server_shutdown, ...
    std::string message; // names the field or the stage
};

struct VideoRecord {
    std::string id;   // video_<hex>
    uint64_t seq = 0; // submission order across restarts (newest first listing)
    JobStatus status = JobStatus::kQueued;
    double progress = 0; // 0..100
    std::string stage;   // queued, encode, denoise, decode, mux, done
    int64_t created_at = 0, started_at = 0, completed_at = 0, expires_at = 0;
    std::string model, prompt, size, quality, cache;
    double seconds = 0; // the clip's duration after frame snapping
    int frames = 0;
    uint64_t seed = 0;
    int steps = 0;
    OutputFormat output_format = OutputFormat::kMp4;
    std::optional<JobError> error;
    std::vector<std::string> warnings; // the builder's (a prompt outside the checkpoint's vocabulary)
    // The job's estimated run time on a CPU server (pipeline/cost_estimate.h); nullopt on a GPU.
    std::optional<double> estimated_seconds;
    nlohmann::json metrics; // work counters and stage seconds once completed (null before)
    nlohmann::json request; // VideoRequest::to_json()

    // `record` adds the server-only fields (seq, started_at, stage, request).
    nlohmann::json to_json(bool record = false) const;
};

// A fresh queued record for a validated request.
VideoRecord make_record(const std::string& id, uint64_t seq, int64_t now, const VideoRequest& request);

// Reads a record written by to_json(true). Errors name the field.
Result<VideoRecord> record_from_json(const nlohmann::json& j);

// Content file names inside a job's directory.
inline constexpr const char* kVideoFile = "video.mp4";
inline constexpr const char* kAudioFile = "audio.wav";
inline constexpr const char* kLatentsFile = "latents.safetensors";
inline constexpr const char* kContentFiles[] = {kVideoFile, kAudioFile, kLatentsFile};

} // namespace h3::api
