// CUDA graphs behind ops/graph.h: stream capture in thread-local mode, instantiate, launch.
#include "core/storage.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using cuda_detail::cuda_status;
using cuda_detail::stream_of;

bool stream_recording(const Context& ctx) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_of(ctx), &st) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return st != cudaStreamCaptureStatusNone;
}

uint64_t graph_epoch(const Context& ctx) {
    return ctx.cuda->scratch_generation();
}

Status graph_record(const Context& ctx, const std::function<Status()>& work, void*& exec, size_t& nodes) {
    cudaStream_t s = stream_of(ctx);
    if (stream_recording(ctx))
        return invalid_argument(
            "StreamGraph::record: the stream is already recording (recordings do not nest)");
    H3_TRY(cuda_status(cudaSetDevice(ctx.cuda->device()), "cudaSetDevice"));
    H3_TRY(
        cuda_status(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
    Status worked;
    {
        const DeviceAllocationFence fence("the thread is recording a CUDA graph (recorded work must not own "
                                          "device buffers: allocate them before recording)");
        worked = work();
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(s, &graph);
    if (!worked.ok() || ended != cudaSuccess) {
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError(); // capture errors are not sticky; leave none behind for the next op's check
        if (!worked.ok()) return worked.with_context("while recording a CUDA graph");
        return cuda_status(ended, "cudaStreamEndCapture (an op made a call that cannot be recorded)");
    }
    size_t n = 0;
    Status st = cuda_status(cudaGraphGetNodes(graph, nullptr, &n), "cudaGraphGetNodes");
    cudaGraphExec_t e = nullptr;
    if (st.ok()) st = cuda_status(cudaGraphInstantiateWithFlags(&e, graph, 0), "cudaGraphInstantiate");
    cudaGraphDestroy(graph);
    if (!st.ok()) {
        cudaGetLastError();
        return st;
    }
    exec = e;
    nodes = n;
    return ok_status();
}

Status graph_launch(const Context& ctx, void* exec) {
    return cuda_status(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), stream_of(ctx)),
                       "cudaGraphLaunch");
}

void graph_destroy(void* exec) {
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)); // best effort: a destructor reports nothing
}

} // namespace h3::ops::cuda_impl
