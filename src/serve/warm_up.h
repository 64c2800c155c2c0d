// The server's warm-up (issue #45, no first-step penalty): the engine's warm-up for the server's default
// job, run once by the worker before it takes its first job, so that job's first forward costs what its
// others do. /health reports its state ("warm_up") and answers 503 "warming_up" until it has ended;
// submissions are queued meanwhile. SIGTERM cancels it (cancel()). A failed warm-up is logged and reported;
// the server serves on (its jobs then pay the one-time work themselves).
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

namespace h3::serve {

class WarmUp {
public:
    // The warm-up itself: returns kCancelled once `cancel` is set. Null: no warm-up (state "off").
    using Fn = std::function<Status(const std::atomic<bool>* cancel)>;
    explicit WarmUp(Fn fn = nullptr);

    bool enabled() const { return static_cast<bool>(fn_); }
    // Runs it once (later calls return at once); never throws.
    void run();
    void cancel() { cancel_.store(true); }
    // Until it has ended: pending (not started) or running.
    bool warming() const;
    // {"state": off | pending | running | done | failed | cancelled, "seconds": …, "error": "…" (failed)}.
    nlohmann::json status() const;

private:
    Fn fn_;
    std::atomic<bool> cancel_{false};
    mutable std::mutex m_;
    std::string state_;
    std::string error_;
    double seconds_ = 0;
};

} // namespace h3::serve
