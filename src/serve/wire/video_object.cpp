#include "serve/wire/video_object.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace h3::api {

namespace {

constexpr JobStatus kAllStatuses[] = {JobStatus::kQueued, JobStatus::kInProgress, JobStatus::kCompleted,
                                      JobStatus::kFailed, JobStatus::kCancelled};

nlohmann::json time_or_null(int64_t t) {
    return t > 0 ? nlohmann::json(t) : nlohmann::json(nullptr);
}

// "4.458": the duration with at most three decimals, as OpenAI's string-typed `seconds`.
std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", s);
    std::string t = buf;
    while (!t.empty() && t.back() == '0') t.pop_back();
    if (!t.empty() && t.back() == '.') t.pop_back();
    return t;
}

template <typename T> Status read_field(const nlohmann::json& j, const char* name, T& out, bool required) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) {
        if (required) return bad_input(std::string("job record: missing field '") + name + "'");
        return ok_status();
    }
    try {
        out = it->get<T>();
    } catch (const nlohmann::json::exception&) {
        return bad_input(std::string("job record: field '") + name + "' has the wrong type");
    }
    return ok_status();
}

} // namespace

const char* job_status_name(JobStatus s) {
    switch (s) {
    case JobStatus::kQueued:
        return "queued";
    case JobStatus::kInProgress:
        return "in_progress";
    case JobStatus::kCompleted:
        return "completed";
    case JobStatus::kFailed:
        return "failed";
    case JobStatus::kCancelled:
        return "cancelled";
    }
    return "unknown";
}

Result<JobStatus> parse_job_status(const std::string& name) {
    for (JobStatus s : kAllStatuses)
        if (name == job_status_name(s)) return s;
    return bad_input("unknown job status '" + name + "'");
}

nlohmann::json VideoRecord::to_json(bool record) const {
    nlohmann::json j;
    j["id"] = id;
    j["object"] = "video";
    j["status"] = job_status_name(status);
    j["progress"] = static_cast<int>(std::floor(std::clamp(progress, 0.0, 100.0)));
    j["created_at"] = created_at;
    j["completed_at"] = time_or_null(completed_at);
    j["expires_at"] = time_or_null(expires_at);
    j["model"] = model;
    j["prompt"] = prompt;
    j["seconds"] = seconds_text(seconds);
    j["size"] = size;
    j["frames"] = frames;
    j["seed"] = seed;
    j["num_inference_steps"] = steps;
    j["quality"] = quality.empty() ? nlohmann::json(nullptr) : nlohmann::json(quality);
    j["cache"] = cache;
    j["output_format"] = output_format_name(output_format);
    j["error"] =
        error ? nlohmann::json{{"code", error->code}, {"message", error->message}} : nlohmann::json(nullptr);
    j["metrics"] = metrics;
    j["url"] = status == JobStatus::kCompleted ? nlohmann::json("/v1/videos/" + id + "/content")
                                               : nlohmann::json(nullptr);
    j["warnings"] = warnings;
    j["estimated_seconds"] = estimated_seconds ? nlohmann::json(*estimated_seconds) : nlohmann::json(nullptr);
    if (record) {
        j["seq"] = seq;
        j["stage"] = stage;
        j["started_at"] = time_or_null(started_at);
        j["seconds_exact"] = seconds;
        j["request"] = request;
    }
    return j;
}

VideoRecord make_record(const std::string& id, uint64_t seq, int64_t now, const VideoRequest& rq) {
    VideoRecord r;
    r.id = id;
    r.seq = seq;
    r.status = JobStatus::kQueued;
    r.stage = "queued";
    r.created_at = now;
    r.model = rq.model;
    r.prompt = rq.job.prompt;
    r.size = std::to_string(rq.job.geometry.width) + "x" + std::to_string(rq.job.geometry.height);
    r.quality = rq.job.quality;
    r.cache = rq.job.cache.describe();
    r.seconds = rq.job.geometry.seconds();
    r.frames = rq.job.geometry.frames;
    r.seed = rq.job.seed;
    r.steps = rq.job.steps;
    r.output_format = rq.output_format;
    r.request = rq.to_json();
    r.warnings = rq.job.warnings;
    r.estimated_seconds = rq.job.estimated_seconds;
    return r;
}

Result<VideoRecord> record_from_json(const nlohmann::json& j) {
    if (!j.is_object()) return bad_input("job record: not a JSON object");
    VideoRecord r;
    std::string status, format;
    H3_TRY(read_field(j, "id", r.id, true));
    H3_TRY(read_field(j, "seq", r.seq, true));
    H3_TRY(read_field(j, "status", status, true));
    H3_TRY(read_field(j, "progress", r.progress, false));
    H3_TRY(read_field(j, "stage", r.stage, false));
    H3_TRY(read_field(j, "created_at", r.created_at, true));
    H3_TRY(read_field(j, "started_at", r.started_at, false));
    H3_TRY(read_field(j, "completed_at", r.completed_at, false));
    H3_TRY(read_field(j, "expires_at", r.expires_at, false));
    H3_TRY(read_field(j, "model", r.model, false));
    H3_TRY(read_field(j, "prompt", r.prompt, false));
    H3_TRY(read_field(j, "size", r.size, false));
    H3_TRY(read_field(j, "quality", r.quality, false));
    H3_TRY(read_field(j, "cache", r.cache, false));
    H3_TRY(read_field(j, "seconds_exact", r.seconds, false));
    H3_TRY(read_field(j, "frames", r.frames, false));
    H3_TRY(read_field(j, "seed", r.seed, false));
    H3_TRY(read_field(j, "num_inference_steps", r.steps, false));
    H3_TRY(read_field(j, "output_format", format, true));
    H3_ASSIGN_OR_RETURN(r.status, parse_job_status(status));
    auto f = parse_output_format(format);
    if (!f.ok()) return bad_input("job record: " + f.status().message());
    r.output_format = *f;
    if (auto it = j.find("error"); it != j.end() && it->is_object()) {
        JobError e;
        H3_TRY(read_field(*it, "code", e.code, true));
        H3_TRY(read_field(*it, "message", e.message, true));
        r.error = e;
    }
    H3_TRY(read_field(j, "warnings", r.warnings, false));
    if (auto it = j.find("estimated_seconds"); it != j.end() && it->is_number())
        r.estimated_seconds = it->get<double>();
    if (auto it = j.find("metrics"); it != j.end()) r.metrics = *it;
    if (auto it = j.find("request"); it != j.end()) r.request = *it;
    if (r.id.empty()) return bad_input("job record: empty id");
    return r;
}

} // namespace h3::api
