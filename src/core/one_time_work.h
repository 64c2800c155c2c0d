// One-time work (issue #45, "no first-step penalty"): what a forward did that a later forward of the same
// shape does not do again — GEMM algorithm timings of new shapes, attention plans built, buffers of the
// DiT's workspace / scratch / staging / buffer pools and the ops' scratch allocated or grown, block graphs
// recorded. The code doing such work notes it (note_one_time) into the calling thread's counter, which the
// job's ops::ProvenanceScope installs (a device group's rank threads inherit it); the denoising loop reads
// the counter around every forward and reports the difference per step (cache::StepRecord::one_time).
// Without a counter nothing is noted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace h3 {

struct OneTimeWork {
    int64_t gemm_tunings = 0;          // GEMM problems whose algorithm was chosen by timing candidates
    double gemm_tuning_seconds = 0;    // host seconds spent timing them
    int64_t attention_plans = 0;       // attention plans built (cuDNN graphs)
    double attention_plan_seconds = 0; // host seconds spent building them
    int64_t workspace_allocations = 0; // buffers allocated or grown (device and page-locked host)
    uint64_t workspace_bytes = 0;      // their bytes
    int64_t graph_recordings = 0;      // DiT blocks recorded as CUDA graphs
    double graph_recording_seconds = 0;

    OneTimeWork& operator+=(const OneTimeWork& o);
    friend OneTimeWork operator-(OneTimeWork a, const OneTimeWork& b);
    // No one-time work at all (every count zero).
    bool none() const;
};

// A thread-safe sum of noted work (a job's: ops::ProvenanceRecord holds one).
class OneTimeCounter {
public:
    void add(const OneTimeWork& w);
    OneTimeWork total() const;

private:
    mutable std::mutex m_;
    OneTimeWork total_;
};

// Installs `counter` as the calling thread's until destroyed, then restores the one before it (null keeps the
// enclosing one).
class OneTimeScope {
public:
    explicit OneTimeScope(OneTimeCounter* counter);
    ~OneTimeScope();
    OneTimeScope(const OneTimeScope&) = delete;
    OneTimeScope& operator=(const OneTimeScope&) = delete;

private:
    OneTimeCounter* previous_;
};

OneTimeCounter* one_time_counter(); // the calling thread's (nullptr outside every scope)
void note_one_time(const OneTimeWork& w);
// One buffer of `bytes` allocated for reuse (a workspace, scratch, staging buffer or pool entry).
void note_workspace_allocation(size_t bytes);

// Counts the allocate_host / allocate_pinned / allocate_device calls made on this thread while it lives
// (nested tallies each count them), for code that sizes a workspace in many allocations.
class AllocationTally {
public:
    AllocationTally();
    ~AllocationTally();
    AllocationTally(const AllocationTally&) = delete;
    AllocationTally& operator=(const AllocationTally&) = delete;
    int64_t count() const { return count_; }
    uint64_t bytes() const { return bytes_; }
    // Notes what was counted so far as workspace allocations (note_one_time) and starts again from zero.
    void note_as_workspace();
    // Called by the allocators (core/storage.cpp).
    static void count_allocation(size_t bytes);

private:
    AllocationTally* previous_;
    int64_t count_ = 0;
    uint64_t bytes_ = 0;
};

} // namespace h3
