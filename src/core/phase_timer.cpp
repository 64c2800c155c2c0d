#include "core/phase_timer.h"

#include <algorithm>

namespace h3 {

void PhaseTimer::reset() {
    used_ = 0;
    clock_.clear();
    names_.clear();
    opens_.clear();
}

Status PhaseTimer::stamp() {
    if (device_.is_cpu()) {
        clock_.push_back(std::chrono::steady_clock::now());
        return ok_status();
    }
    if (used_ == events_.size()) {
        H3_ASSIGN_OR_RETURN(CudaEvent e, CudaEvent::create());
        events_.push_back(std::move(e));
    }
    H3_TRY(events_[used_].record(stream_));
    ++used_;
    return ok_status();
}

Status PhaseTimer::start() {
    const size_t n = device_.is_cpu() ? clock_.size() : used_;
    opens_.push_back(static_cast<int>(n));
    names_.resize(n + 1); // the stamp closing nothing gets an empty name
    return stamp();
}

Status PhaseTimer::mark(const std::string& phase) {
    const size_t n = device_.is_cpu() ? clock_.size() : used_;
    if (n == 0) return invalid_argument("PhaseTimer::mark(" + phase + ") before start()");
    names_.resize(n + 1);
    names_[n] = phase; // the span (n − 1, n]
    return stamp();
}

Result<std::vector<std::pair<std::string, double>>> PhaseTimer::totals() {
    const size_t n = device_.is_cpu() ? clock_.size() : used_;
    std::vector<double> at(n, 0.0);
    if (device_.is_cpu()) {
        for (size_t i = 0; i < n; ++i) at[i] = std::chrono::duration<double>(clock_[i] - clock_[0]).count();
    } else if (n > 0) {
        H3_TRY(events_[n - 1].synchronize());
        for (size_t i = 1; i < n; ++i) {
            H3_ASSIGN_OR_RETURN(float ms, cuda::event_elapsed_ms(events_[0].get(), events_[i].get()));
            at[i] = ms * 1e-3;
        }
    }
    std::vector<std::pair<std::string, double>> out;
    for (size_t i = 1; i < n; ++i) {
        if (std::find(opens_.begin(), opens_.end(), static_cast<int>(i)) != opens_.end()) continue;
        auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == names_[i]; });
        if (it == out.end()) {
            out.push_back({names_[i], 0.0});
            it = out.end() - 1;
        }
        it->second += at[i] - at[i - 1];
    }
    return out;
}

} // namespace h3
