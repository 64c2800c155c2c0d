#include "serve/warm_up.h"

#include "core/log.h"

#include <chrono>
#include <cstdio>
#include <exception>

namespace h3::serve {

WarmUp::WarmUp(Fn fn) : fn_(std::move(fn)), state_(fn_ ? "pending" : "off") {}

void WarmUp::run() {
    {
        std::lock_guard<std::mutex> lk(m_);
        if (state_ != "pending") return;
        state_ = "running";
    }
    std::fprintf(stderr, "serve: warming up\n");
    const auto t0 = std::chrono::steady_clock::now();
    Status s = ok_status();
    try {
        s = cancel_.load() ? cancelled("warm-up cancelled before it started") : fn_(&cancel_);
    } catch (const std::exception& e) {
        s = internal_error(std::string("warm-up: unexpected exception: ") + e.what());
    } catch (...) {
        s = internal_error("warm-up: unexpected exception");
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lk(m_);
    seconds_ = seconds;
    if (s.ok()) {
        state_ = "done";
        std::fprintf(stderr, "serve: warmed up in %.2f s\n", seconds);
    } else if (s.code() == ErrorCode::kCancelled) {
        state_ = "cancelled";
        std::fprintf(stderr, "serve: warm-up cancelled after %.2f s\n", seconds);
    } else {
        state_ = "failed";
        error_ = s.to_string();
        H3_LOG_WARN("serve: warm-up failed after {:.2f} s (jobs run without it): {}", seconds, error_);
    }
}

bool WarmUp::warming() const {
    std::lock_guard<std::mutex> lk(m_);
    return state_ == "pending" || state_ == "running";
}

nlohmann::json WarmUp::status() const {
    std::lock_guard<std::mutex> lk(m_);
    nlohmann::json j = {{"state", state_}};
    if (state_ != "off" && state_ != "pending") j["seconds"] = seconds_;
    if (!error_.empty()) j["error"] = error_;
    return j;
}

} // namespace h3::serve
