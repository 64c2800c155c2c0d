// The HTTP routes of the video API. Handlers only parse, validate and serialize: jobs go to the JobBoard,
// the worker runs them. Routes:
//   POST   /v1/videos                 submit (JSON or multipart) → video object (429 + Retry-After when full)
//   POST   /v1/videos/sync            submit and wait            → the MP4 / WAV / latents bytes
//   GET    /v1/videos                 list, newest first         ?limit=N&after=ID&order=desc|asc
//   GET    /v1/videos/{id}            the video object
//   GET    /v1/videos/{id}/content    the MP4 (?variant=audio: the WAV; a latents job's safetensors);
//                                      one byte Range → 206
//   GET    /v1/videos/{id}/events     server-sent progress events
//   POST   /v1/videos/{id}/cancel     cancel, keep the record (no body needed)
//   DELETE /v1/videos/{id}            cancel if needed, then delete
//   GET    /v1/models                 the loaded model: its name, defaults (size, frames, steps) and limits
//   GET    /health, GET /metrics      liveness, Prometheus text
// The request target is parsed once, strictly (serve/request_target.h): routes match the exact decoded path;
// an encoded control byte, an encoded '/', a dot segment or a malformed escape is a 400, more than 32 query
// parameters a 400, a target over 8 KiB or a query over 4 KiB a 414 (code invalid_request_target or
// uri_too_long), always answered at once.
// Errors are OpenAI-style {"error": {"message", "type", "param", "code"}}: 400 names the field, 401 for a
// wrong or missing key (when one is set; /health stays open), 404 for an unknown id or route, 408 for a body
// that takes too long, 413 for a body over the limit (counted after Content-Encoding is undone), 415 for an
// unknown Content-Encoding, 503 when a budget (event streams, sync waiters, parse queue, buffered bodies)
// is full.
//
// The listener is GNU libmicrohttpd in its event-driven mode (epoll, a few polling threads; what serious
// servers do — nginx, HAProxy): an idle or slow connection costs memory (bounded per connection), never a
// thread, so /health answers while hundreds of sockets dawdle. Request lines and headers are bounded by the
// per-connection memory pool, bodies by --max-body-bytes as they are decoded, each connection by an idle
// timeout and each body by a deadline. Work that takes long runs off the polling threads: submissions are
// parsed on a small pool of their own, and sync requests and event streams park their connection (suspend)
// until their job changes, each kind with its own cap. cpp-httplib (what this replaced) cannot be made safe:
// its 0.11 reader grows a request line or header list without bound before any hook runs, reads chunked
// and compressed bodies past its payload limit, and serves every connection from one fixed thread pool.
#pragma once

#include "serve/job_queue.h"
#include "serve/job_store.h"
#include "serve/prometheus_metrics.h"
#include "serve/submission.h"
#include "serve/warm_up.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace h3::serve {

struct HttpOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                 // 0: any free port
    std::string api_key;             // empty: no authentication
    size_t max_body_bytes = 1 << 20; // decoded
    int max_connections = 1024;      // open sockets at once (more are refused at accept)
    int poll_threads = 2;            // event-loop threads
    int parse_threads = 2;           // submissions parsed at once (image / video decoding)
    int max_parse_queue = 16;        // submissions waiting for a parse thread (503 over)
    int max_event_streams = 64;      // GET …/events streams at once (503 over)
    int max_sync_waiters = 16;       // POST /v1/videos/sync requests waiting at once (503 over)
    int64_t max_buffered_body_bytes = int64_t{256} << 20; // bodies held in memory at once (503 over)
    int idle_timeout_seconds = 30;                        // a connection with no traffic is closed
    int body_timeout_seconds = 120;                       // a body must arrive within this (408)
    SubmissionLimits limits;
    // Reported by /health: the model store's placement plan and the budget planner's text (empty: none).
    std::string placement, memory_plan;
    // A server of replicas (`serve --gpus`): each replica's status for /health's "replicas" and /metrics'
    // per-replica lines (unset: neither appears).
    std::function<nlohmann::json()> replicas;
    // The server's warm-up (null: none): /health reports its status ("warm_up") and answers 503 with
    // status "warming_up" until it has ended.
    const WarmUp* warm_up = nullptr;
};

class HttpServer {
public:
    // `builder` validates submissions against the checkpoint the worker runs.
    HttpServer(JobBoard& board, const JobStore& store, Metrics& metrics, const pipeline::JobBuilder& builder,
               HttpOptions options);
    ~HttpServer();

    Result<int> bind(); // binds host:port and starts serving; returns the port
    void listen();      // blocks until stop()
    // Ends the waiters (event streams, sync requests), lets running parses finish, stops the listener.
    void stop();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace h3::serve
