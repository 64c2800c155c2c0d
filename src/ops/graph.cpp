#include "ops/graph.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

namespace {
bool graphs_allowed_by_environment() {
    static const bool allowed = [] {
        const char* e = std::getenv("H3_CUDA_GRAPHS");
        return !(e && std::strcmp(e, "0") == 0);
    }();
    return allowed;
}
} // namespace

bool graphs_available(const Context& ctx) {
#ifdef H3_WITH_CUDA
    return ctx.is_cuda() && ctx.cuda != nullptr && graphs_allowed_by_environment();
#else
    (void)ctx;
    (void)graphs_allowed_by_environment;
    return false;
#endif
}

uint64_t graph_epoch(const Context& ctx) {
#ifdef H3_WITH_CUDA
    if (ctx.is_cuda() && ctx.cuda) return cuda_impl::graph_epoch(ctx);
#endif
    (void)ctx;
    return 0;
}

bool stream_recording(const Context& ctx) {
#ifdef H3_WITH_CUDA
    if (ctx.is_cuda() && ctx.cuda) return cuda_impl::stream_recording(ctx);
#endif
    (void)ctx;
    return false;
}

Result<StreamGraph> StreamGraph::record(const Context& ctx, const std::function<Status()>& work) {
    if (!ctx.is_cuda() || !ctx.cuda)
        return invalid_argument("StreamGraph::record: recording needs a CUDA context (this one is " +
                                ctx.device.to_string() + ")");
#ifdef H3_WITH_CUDA
    StreamGraph g;
    H3_TRY(cuda_impl::graph_record(ctx, work, g.exec_, g.nodes_));
    return g;
#else
    (void)work;
    return unimplemented("StreamGraph::record: this build has no CUDA backend");
#endif
}

StreamGraph::~StreamGraph() {
    reset();
}

StreamGraph::StreamGraph(StreamGraph&& o) noexcept
    : exec_(std::exchange(o.exec_, nullptr)), nodes_(std::exchange(o.nodes_, 0)) {}

StreamGraph& StreamGraph::operator=(StreamGraph&& o) noexcept {
    if (this != &o) {
        reset();
        exec_ = std::exchange(o.exec_, nullptr);
        nodes_ = std::exchange(o.nodes_, 0);
    }
    return *this;
}

void StreamGraph::reset() {
#ifdef H3_WITH_CUDA
    if (exec_) cuda_impl::graph_destroy(exec_);
#endif
    exec_ = nullptr;
    nodes_ = 0;
}

Status StreamGraph::launch(const Context& ctx) const {
    if (!exec_) return invalid_argument("StreamGraph::launch: nothing was recorded");
    if (!ctx.is_cuda() || !ctx.cuda)
        return invalid_argument("StreamGraph::launch: a recording runs on a CUDA context (this one is " +
                                ctx.device.to_string() + ")");
#ifdef H3_WITH_CUDA
    return cuda_impl::graph_launch(ctx, exec_);
#else
    return unimplemented("StreamGraph::launch: this build has no CUDA backend");
#endif
}

} // namespace h3::ops
