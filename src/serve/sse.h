// Server-sent progress events of one job (GET /v1/videos/{id}/events): `event: progress` with the job's
// status, progress, stage and denoise step as JSON, in order, then one final `event: done`, `failed` or
// `cancelled` carrying the video object, after which the stream ends. Comments keep idle streams alive.
// The stream is pulled without blocking (the HTTP layer parks the connection while there is nothing to send).
#pragma once

#include "serve/job_queue.h"

#include <chrono>
#include <memory>
#include <string>

namespace h3::serve {

// "id: N\nevent: NAME\ndata: JSON\n\n"
std::string sse_event(const std::string& event, const nlohmann::json& data, uint64_t id);
// progress | done | failed | cancelled
const char* sse_event_name(api::JobStatus status);
// The data of a progress event.
nlohmann::json sse_progress_data(const JobSnapshot& snapshot);

class JobEventStream {
public:
    static constexpr std::chrono::milliseconds kKeepAlive{10000};

    JobEventStream(const JobBoard& board, std::shared_ptr<Job> job);

    enum class Pull { kData, kWait, kEnd };
    // kData: `out` holds the next event (or a keep-alive comment after kKeepAlive without one); kWait:
    // nothing to send yet; kEnd: the final event was sent, or `stopping`.
    Pull pull(std::string& out, bool stopping);
    // Whether pull would give data now (the job changed, or a keep-alive is due).
    bool ready() const;

private:
    const JobBoard& board_;
    std::shared_ptr<Job> job_;
    uint64_t sent_ = 0; // last version sent
    bool done_ = false;
    std::chrono::steady_clock::time_point last_write_;
};

} // namespace h3::serve
