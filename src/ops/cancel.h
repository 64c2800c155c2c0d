// Cooperative cancellation inside ops (issue #42). The thread that runs a job installs the job's cancel flag
// with a CancelScope for as long as the job runs; every CPU op reads it before it starts (the dispatchers)
// and the long CPU loops read it between blocks of work: attention per query row, GEMM and convolution per
// bounded sgemm block (kCancelCheckMacs), the BigVGAN activation per channel row, VSA per query tile. A set
// flag makes the op return kCancelled ("OP: cancelled"), which model and pipeline code propagate like any
// error, RAII freeing what the job held. The collectives' waits (ops/communicator) read it while they wait.
// CUDA launches are not polled per op (the model code checks between its blocks; no device sync for it).
//
// Why the calling thread and not a field of ops::Context: the models keep their Context across jobs (a
// server's resident DiT, text stack, decoders), while the flag belongs to one job and the thread running it.
// An op reads the flag on the calling thread and hands the pointer to its OpenMP workers; code that starts
// threads of its own for a job's work installs the flag on them (runtime/device_group's rank threads).
#pragma once

#include "core/status.h"

#include <atomic>
#include <cstdint>

namespace h3::ops {

// Work between two reads of the flag in the sgemm-based CPU ops: about 2^30 multiply-adds (tens of ms on a
// few cores).
inline constexpr int64_t kCancelCheckMacs = int64_t{1} << 30;

// Installs `flag` as the calling thread's cancel flag until destroyed, then restores the one before it. A
// null flag keeps the enclosing scope's flag (a stage called with no flag of its own stays cancellable).
class CancelScope {
public:
    explicit CancelScope(const std::atomic<bool>* flag);
    ~CancelScope();
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

private:
    const std::atomic<bool>* previous_;
};

// The calling thread's flag (nullptr outside every scope).
const std::atomic<bool>* cancel_flag();

inline bool cancel_requested(const std::atomic<bool>* flag) {
    return flag != nullptr && flag->load(std::memory_order_relaxed);
}
// Whether the calling thread's job was cancelled.
inline bool cancel_requested() {
    return cancel_requested(cancel_flag());
}

// kCancelled naming the op: "attention: cancelled".
Status cancelled_in(const char* op);

} // namespace h3::ops
