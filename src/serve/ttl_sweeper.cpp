#include "serve/ttl_sweeper.h"

#include "core/log.h"

#include <algorithm>
#include <ctime>

namespace h3::serve {

TtlSweeper::TtlSweeper(JobBoard& board, std::chrono::milliseconds interval)
    : board_(board), interval_(interval) {}

TtlSweeper::~TtlSweeper() {
    stop();
}

void TtlSweeper::start() {
    thread_ = std::thread([this] {
        std::unique_lock<std::mutex> lock(mu_);
        while (!stop_) {
            lock.unlock();
            if (int n = board_.sweep_expired(static_cast<int64_t>(std::time(nullptr))); n > 0)
                H3_LOG_INFO("serve: {} expired job(s) deleted", n);
            lock.lock();
            cv_.wait_for(lock, interval_, [&] { return stop_; });
        }
    });
}

void TtlSweeper::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::chrono::milliseconds sweep_interval_for(int64_t ttl_seconds) {
    const int64_t ms = std::clamp<int64_t>(ttl_seconds * 250, 250, 60000);
    return std::chrono::milliseconds(ms);
}

} // namespace h3::serve
