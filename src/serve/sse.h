// Server-sent progress events of one job (GET /v1/videos/{id}/events): `event: progress` with the job's
// status, progress, stage and denoise step as JSON, in order, then one final `event: done`, `failed` or
// `cancelled` carrying the video object, after which the stream ends. Comments keep idle streams alive.
#pragma once

#include "serve/job_queue.h"

#include <atomic>
#include <memory>
#include <string>

namespace httplib {
struct Response;
}

namespace h3::serve {

// "id: N\nevent: NAME\ndata: JSON\n\n"
std::string sse_event(const std::string& event, const nlohmann::json& data, uint64_t id);
// progress | done | failed | cancelled
const char* sse_event_name(api::JobStatus status);
// The data of a progress event.
nlohmann::json sse_progress_data(const JobSnapshot& snapshot);

// Installs a chunked provider on `res` that streams the job's events until it is final, the client goes
// away or `stopping` is set.
void stream_job_events(httplib::Response& res, const JobBoard& board, std::shared_ptr<Job> job,
                       const std::atomic<bool>& stopping);

} // namespace h3::serve
