#include "serve/sse.h"

#include <httplib.h>

namespace h3::serve {

namespace {

constexpr auto kKeepAlive = std::chrono::milliseconds(10000);
constexpr auto kPoll = std::chrono::milliseconds(250); // how often `stopping` and the client are checked

} // namespace

std::string sse_event(const std::string& event, const nlohmann::json& data, uint64_t id) {
    return "id: " + std::to_string(id) + "\nevent: " + event + "\ndata: " + data.dump() + "\n\n";
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

void stream_job_events(httplib::Response& res, const JobBoard& board, std::shared_ptr<Job> job,
                       const std::atomic<bool>& stopping) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    struct State {
        uint64_t sent = 0; // last version sent
        std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
    };
    auto state = std::make_shared<State>();
    res.set_chunked_content_provider(
        "text/event-stream", [&board, job, &stopping, state](size_t, httplib::DataSink& sink) {
            for (;;) {
                const JobSnapshot s = board.wait(job, state->sent, kPoll);
                if (s.version > state->sent) {
                    state->sent = s.version;
                    state->last_write = std::chrono::steady_clock::now();
                    if (api::is_final(s.record.status)) {
                        const std::string ev =
                            sse_event(sse_event_name(s.record.status), s.record.to_json(), s.version);
                        sink.write(ev.data(), ev.size());
                        sink.done();
                        return true;
                    }
                    const std::string ev = sse_event("progress", sse_progress_data(s), s.version);
                    return sink.write(ev.data(), ev.size());
                }
                if (stopping.load()) return false; // ends the response
                if (sink.is_writable && !sink.is_writable()) return false;
                if (std::chrono::steady_clock::now() - state->last_write > kKeepAlive) {
                    state->last_write = std::chrono::steady_clock::now();
                    static const std::string ping = ": keep-alive\n\n";
                    return sink.write(ping.data(), ping.size());
                }
            }
        });
}

} // namespace h3::serve
