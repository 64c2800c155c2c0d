#include "serve/sse.h"

namespace h3::serve {

std::string sse_event(const std::string& event, const nlohmann::json& data, uint64_t id) {
    return "id: " + std::to_string(id) + "\nevent: " + event +
           "\ndata: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

const char* sse_event_name(api::JobStatus status) {
    switch (status) {
    case api::JobStatus::kCompleted:
        return "done";
    case api::JobStatus::kFailed:
        return "failed";
    case api::JobStatus::kCancelled:
        return "cancelled";
    default:
        return "progress";
    }
}

nlohmann::json sse_progress_data(const JobSnapshot& s) {
    nlohmann::json j = {{"id", s.record.id},
                        {"status", api::job_status_name(s.record.status)},
                        {"progress", s.record.to_json()["progress"]},
                        {"stage", s.record.stage}};
    if (s.total > 0) {
        j["step"] = s.step;
        j["total_steps"] = s.total;
    }
    return j;
}

JobEventStream::JobEventStream(const JobBoard& board, std::shared_ptr<Job> job)
    : board_(board), job_(std::move(job)), last_write_(std::chrono::steady_clock::now()) {}

JobEventStream::Pull JobEventStream::pull(std::string& out, bool stopping) {
    if (done_) return Pull::kEnd;
    const JobSnapshot s = board_.wait(job_, UINT64_MAX, std::chrono::milliseconds(0));
    const auto now = std::chrono::steady_clock::now();
    if (s.version > sent_) {
        sent_ = s.version;
        last_write_ = now;
        if (api::is_final(s.record.status)) {
            out = sse_event(sse_event_name(s.record.status), s.record.to_json(), s.version);
            done_ = true;
        } else {
            out = sse_event("progress", sse_progress_data(s), s.version);
        }
        return Pull::kData;
    }
    if (stopping) return Pull::kEnd;
    if (now - last_write_ >= kKeepAlive) {
        last_write_ = now;
        out = ": keep-alive\n\n";
        return Pull::kData;
    }
    return Pull::kWait;
}

bool JobEventStream::ready() const {
    if (done_) return true;
    return board_.wait(job_, UINT64_MAX, std::chrono::milliseconds(0)).version > sent_ ||
           std::chrono::steady_clock::now() - last_write_ >= kKeepAlive;
}

} // namespace h3::serve
