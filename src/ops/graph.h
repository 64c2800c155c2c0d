// Recorded device work (CUDA graphs): a sequence of ops queued on a context's stream is recorded once and
// replayed with one launch, skipping the host work of every op (validation, descriptor lookups, launches).
// For small shapes that work is what the step costs; the DiT records each block (model/dit/dit_graphs.cpp).
//
// A recording holds the pointers and scalars its ops were given: it replays exactly that work on exactly
// those buffers. Whoever records must keep them alive and unchanged in place, re-record when any changes,
// and re-record when graph_epoch() moves (a buffer the ops share between calls was replaced).
#pragma once

#include "core/status.h"
#include "ops/context.h"

#include <cstddef>
#include <cstdint>
#include <functional>

namespace h3::ops {

// Whether `ctx` can record: a CUDA context in a CUDA build, unless H3_CUDA_GRAPHS=0 turned recording off
// for the process (read once).
bool graphs_available(const Context& ctx);

// Moves whenever the context replaces a device buffer that its ops share between calls (the grow-only
// scratch, ops/cuda/cuda_context.h): work recorded under another epoch may point at freed memory.
uint64_t graph_epoch(const Context& ctx);

// Whether ctx's stream is recording now (ops that would time or synchronize refuse to run then).
bool stream_recording(const Context& ctx);

class StreamGraph {
public:
    // Runs `work` with ctx's stream recording instead of executing, and readies what it queued for launch.
    // The work has NOT run when this returns: launch() runs it. The recording is thread-local: a call the
    // thread makes that cannot be recorded (a device allocation, a synchronization) fails inside `work`.
    // Errors: the work's own (its recording is discarded) or the runtime's; the stream is no longer
    // recording either way, and nothing it held stays alive.
    static Result<StreamGraph> record(const Context& ctx, const std::function<Status()>& work);

    StreamGraph() = default;
    ~StreamGraph();
    StreamGraph(StreamGraph&& o) noexcept;
    StreamGraph& operator=(StreamGraph&& o) noexcept;
    StreamGraph(const StreamGraph&) = delete;
    StreamGraph& operator=(const StreamGraph&) = delete;

    bool defined() const { return exec_ != nullptr; }
    size_t nodes() const { return nodes_; } // the recorded operations (kernels, copies, memsets)
    // Queues the recorded work on ctx's stream (the context it was recorded on).
    Status launch(const Context& ctx) const;

private:
    void reset();
    void* exec_ = nullptr; // cudaGraphExec_t
    size_t nodes_ = 0;
};

} // namespace h3::ops
