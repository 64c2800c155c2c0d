// The HTTP routes of the video API (cpp-httplib). Handlers only parse, validate and serialize: jobs go to
// the JobBoard, the worker runs them. Routes:
//   POST   /v1/videos                 submit (JSON)            → video object (429 + Retry-After when full)
//   POST   /v1/videos/sync            submit and wait          → the MP4 / WAV / latents bytes
//   GET    /v1/videos                 list, newest first       ?limit=N&after=ID&order=desc|asc
//   GET    /v1/videos/{id}            the video object
//   GET    /v1/videos/{id}/content    the MP4 (?variant=audio: the WAV; a latents job's safetensors)
//   GET    /v1/videos/{id}/events     server-sent progress events
//   POST   /v1/videos/{id}/cancel     cancel, keep the record
//   DELETE /v1/videos/{id}            cancel if needed, then delete
//   GET    /health, GET /metrics      liveness, Prometheus text
// Errors are OpenAI-style {"error": {"message", "type", "param", "code"}}: 400 names the field, 401 for a
// wrong or missing key (when one is set; /health stays open), 404 for an unknown id or route, 413 for a
// body over the limit.
#pragma once

#include "pipeline/job_builder.h"
#include "serve/job_queue.h"
#include "serve/job_store.h"
#include "serve/prometheus_metrics.h"
#include "serve/wire/video_request.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace httplib {
class Server;
}

namespace h3::serve {

struct HttpOptions {
    std::string host = "127.0.0.1";
    int port = 8080;     // 0: any free port
    std::string api_key; // empty: no authentication
    size_t max_body_bytes = 1 << 20;
    int threads = 32; // connections served at once (SSE and sync hold one each)
    api::WireLimits limits;
    // Reported by /health: the model store's placement plan and the budget planner's text (empty: none).
    std::string placement, memory_plan;
};

class HttpServer {
public:
    // `builder` validates submissions against the checkpoint the worker runs.
    HttpServer(JobBoard& board, const JobStore& store, Metrics& metrics, const pipeline::JobBuilder& builder,
               HttpOptions options);
    ~HttpServer();

    Result<int> bind(); // binds host:port; returns the port
    void listen();      // serves until stop()
    // Ends the waiters (event streams, sync requests) and stops the listener.
    void stop();

private:
    void routes();

    JobBoard& board_;
    const JobStore& store_;
    Metrics& metrics_;
    const pipeline::JobBuilder& builder_;
    HttpOptions options_;
    std::atomic<bool> stopping_{false};
    std::unique_ptr<httplib::Server> svr_;
};

} // namespace h3::serve
