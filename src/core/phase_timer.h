// Device time per named phase of a stream, without synchronizing it while the work is queued: start() opens
// the first phase, every mark(name) closes the phase that began at the previous mark (an event on CUDA; the
// host clock on the CPU, where ops have run by the time they return), totals() waits once for the last event
// and sums the phases by name. For benches (bench dit's per-op breakdown).
#pragma once

#include "core/cuda_api.h"
#include "core/device.h"
#include "core/status.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace h3 {

class PhaseTimer {
public:
    PhaseTimer(Device device, void* stream) : device_(device), stream_(stream) {}
    Status start();
    Status mark(const std::string& phase);
    // Seconds per phase name (first-seen order) over every start()..mark() span since the last reset.
    Result<std::vector<std::pair<std::string, double>>> totals();
    void reset();

private:
    Status stamp();
    Device device_;
    void* stream_ = nullptr;
    std::vector<CudaEvent> events_; // a pool: events_[0..used_) hold this round's stamps
    size_t used_ = 0;
    std::vector<std::chrono::steady_clock::time_point> clock_; // CPU stamps
    std::vector<std::string> names_;                           // names_[i] closes stamp i → i + 1
    std::vector<int> opens_;                                   // stamps that (re)open a span
};

} // namespace h3
