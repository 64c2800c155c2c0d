// A lane for collectives beside a context's stream (issue #46: the Ulysses all-to-all hidden behind
// attention). On CUDA the lane is a stream of its own; work on it and on the context's stream is ordered by
// device events only (no host waits), so a collective queued on the lane runs while the context's stream
// computes. On the CPU the lane is the context itself: everything runs in call order, the waits are no-ops
// and the results are the same.
#pragma once

#include "core/device_stream.h"
#include "core/status.h"
#include "ops/context.h"

#include <memory>
#include <vector>

namespace h3::ops {

class CommLane {
public:
    // A lane for `ctx` (a side stream on its CUDA device; the context itself on the CPU).
    static Result<std::unique_ptr<CommLane>> create(const Context& ctx);
    ~CommLane();
    CommLane(const CommLane&) = delete;
    CommLane& operator=(const CommLane&) = delete;

    // The context collectives run on to be queued on the lane.
    const Context& context() const { return lane_ctx_; }
    // True where the lane is a stream of its own (CUDA).
    bool separate() const { return own_ != nullptr; }
    // The lane's next work waits for what `ctx` queued so far.
    Status wait_for(const Context& ctx);
    // Marks the lane's work queued so far as point `mark` (0, 1, …; a later mark() of the same number
    // replaces it).
    Status mark(int mark);
    // `ctx`'s next work waits for the lane's point `mark`.
    Status wait_mark(const Context& ctx, int mark);

private:
    CommLane() = default;
    Context lane_ctx_;
    std::shared_ptr<void> own_; // the CudaContext of the side stream (CUDA builds), typed away here
    DeviceEvent compute_done_;  // ctx's point the lane waits for
    std::vector<DeviceEvent> marks_;
};

} // namespace h3::ops
