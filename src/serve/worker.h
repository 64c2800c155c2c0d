// The one thread that owns the engine: takes the next queued job, runs it with progress reported to the
// board and the job's cancel flag, moves the finished outputs into place and records the outcome. A job
// that fails (an error status or an exception) fails alone: its outputs are removed, its error is in its
// record, and the loop goes on with the next job.
#pragma once

#include "api/engine.h"
#include "serve/job_queue.h"
#include "serve/job_store.h"
#include "serve/prometheus_metrics.h"

#include <functional>
#include <thread>

namespace h3::serve {

// Runs one job (the engine's run(), or a stand-in).
using JobRunner = std::function<Result<api::JobResult>(const api::VideoRequest&, const api::JobOutputs&,
                                                       const api::JobOptions&)>;

struct WorkerParams {
    std::string fault_prompt; // forwarded to JobOptions (testing)
};

class Worker {
public:
    Worker(JobBoard& board, const JobStore& store, Metrics& metrics, JobRunner runner, WorkerParams params);
    ~Worker();
    void start();
    void join(); // returns once the board is closed and the running job has ended

private:
    void loop();
    void run_one(const std::shared_ptr<Job>& job);

    JobBoard& board_;
    const JobStore& store_;
    Metrics& metrics_;
    JobRunner runner_;
    WorkerParams params_;
    std::thread thread_;
};

} // namespace h3::serve
