// Deletes finished jobs (record and outputs) once their expires_at has passed: at start and then every
// `interval` until stopped.
#pragma once

#include "serve/job_queue.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace h3::serve {

class TtlSweeper {
public:
    TtlSweeper(JobBoard& board, std::chrono::milliseconds interval);
    ~TtlSweeper(); // stops
    void start();
    void stop();

private:
    JobBoard& board_;
    std::chrono::milliseconds interval_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

// The sweep interval for a TTL: a quarter of it, between 0.25 s and 60 s.
std::chrono::milliseconds sweep_interval_for(int64_t ttl_seconds);

} // namespace h3::serve
