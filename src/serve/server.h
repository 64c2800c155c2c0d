// One server process: the job store (with restart recovery), the board, the worker, the TTL sweeper and
// the HTTP listener, wired together; SIGTERM / SIGINT stop it cleanly (no new jobs, queued jobs failed
// with the reason, the running one cancelled or finished as --on-term says, records flushed).
#pragma once

#include "serve/http_server.h"
#include "serve/warm_up.h"
#include "serve/worker.h"

#include <chrono>
#include <string>
#include <vector>

namespace h3::serve {

enum class OnTerm { kCancel, kFinish };

struct ServeParams {
    std::string output_dir = "h3-serve-output";
    size_t max_queue = 8;
    int64_t ttl_seconds = 86400; // 0: outputs never expire
    OnTerm on_term = OnTerm::kCancel;
    // kCancel: how long the cancelled running job may take to stop after SIGTERM; past it the process exits
    // at once (status 4), logging the job and stage it interrupted (its record reads "interrupted" after a
    // restart). Every stage reads the cancel flag within a fraction of a second, so this is a backstop.
    std::chrono::milliseconds term_grace{std::chrono::seconds(10)};
    HttpOptions http;
    // The warm-up the first worker runs before its first job (serve/warm_up.h; null: none). SIGTERM / SIGINT
    // cancel it through its flag.
    WarmUp::Fn warm_up;
};

// Serves until SIGTERM or SIGINT. Prints "serve: listening on http://HOST:PORT" once the port is bound.
// Submissions are built by `builder` (against the runner's checkpoint) and run by `runner` on the worker.
Status run_server(const ServeParams& params, pipeline::JobRunner& runner,
                  const pipeline::JobBuilder& builder);
// One worker per runner (`serve --gpus`: one per replica), one queue: a free worker takes the next job. When
// the runners report a status (replicas), /health and /metrics report each.
Status run_server(const ServeParams& params, const std::vector<pipeline::JobRunner*>& runners,
                  const pipeline::JobBuilder& builder);

} // namespace h3::serve
