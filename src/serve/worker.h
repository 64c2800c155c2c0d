// The one thread that runs jobs: takes the next queued job, runs it on the job runner (pipeline::Generator,
// or a test's stand-in) with progress reported to the board and the job's cancel flag, moves the finished
// outputs into place and records the outcome. A job that fails (an error status or an exception) fails
// alone: its outputs are removed, its error is in its record, and the loop goes on with the next job.
#pragma once

#include "pipeline/generator.h"
#include "serve/job_queue.h"
#include "serve/job_store.h"
#include "serve/prometheus_metrics.h"

#include <thread>

namespace h3::serve {

class Worker {
public:
    Worker(JobBoard& board, const JobStore& store, Metrics& metrics, pipeline::JobRunner& runner);
    ~Worker();
    void start();
    void join(); // returns once the board is closed and the running job has ended

private:
    void loop();
    void run_one(const std::shared_ptr<Job>& job);

    JobBoard& board_;
    const JobStore& store_;
    Metrics& metrics_;
    pipeline::JobRunner& runner_;
    std::thread thread_;
};

} // namespace h3::serve
