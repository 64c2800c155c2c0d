// A thread that runs jobs (one per job runner: the server's one generator, or each replica of `serve
// --gpus`): asks the runner to be ready (a replica restarts processes that ended), takes the next queued job,
// runs it on the job runner (pipeline::Generator, or a test's stand-in) with progress reported to the board
// and the job's cancel flag, moves the finished outputs into place and records the outcome. A job that fails
// (an error status or an exception) fails alone: its outputs are removed, its error is in its record, and the
// loop goes on with the next job.
#pragma once

#include "pipeline/generator.h"
#include "serve/job_queue.h"
#include "serve/job_store.h"
#include "serve/prometheus_metrics.h"
#include "serve/warm_up.h"

#include <mutex>
#include <string>
#include <thread>

namespace h3::serve {

class Worker {
public:
    // `warm_up` (optional, outliving the worker): run before the first job.
    Worker(JobBoard& board, const JobStore& store, Metrics& metrics, pipeline::JobRunner& runner,
           WarmUp* warm_up = nullptr);
    ~Worker();
    void start();
    void join(); // returns once the board is closed and the running job has ended

    // /health and /metrics of a replica: the runner's status (state, processes, restarts) plus the job it
    // runs ("job": id or null), jobs completed ("jobs_done") and failed ("failures"). Thread-safe.
    nlohmann::json status() const;

private:
    void loop();
    void run_one(const std::shared_ptr<Job>& job);

    JobBoard& board_;
    const JobStore& store_;
    Metrics& metrics_;
    pipeline::JobRunner& runner_;
    WarmUp* warm_up_;
    std::thread thread_;
    mutable std::mutex mu_; // the counters below
    std::string current_;   // the running job's id ("" when idle)
    uint64_t done_ = 0, failed_ = 0, cancelled_ = 0;
};

} // namespace h3::serve
