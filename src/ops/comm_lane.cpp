#include "ops/comm_lane.h"

#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_context.h"
#endif

namespace h3::ops {

Result<std::unique_ptr<CommLane>> CommLane::create(const Context& ctx) {
    std::unique_ptr<CommLane> lane(new CommLane());
    lane->lane_ctx_ = ctx;
    if (!ctx.is_cuda()) return lane;
#ifdef H3_WITH_CUDA
    if (!ctx.cuda) return invalid_argument("CommLane: a CUDA context without its CudaContext");
    H3_ASSIGN_OR_RETURN(auto cuda, CudaContext::create_stream_only(ctx.cuda->device()));
    lane->lane_ctx_.cuda = cuda.get();
    lane->own_ = std::shared_ptr<CudaContext>(std::move(cuda));
    H3_ASSIGN_OR_RETURN(lane->compute_done_, DeviceEvent::create(ctx.device));
    return lane;
#else
    return invalid_argument("CommLane: a CUDA context in a build without CUDA");
#endif
}

CommLane::~CommLane() = default; // the side stream's context synchronizes its stream before it goes

Status CommLane::wait_for(const Context& ctx) {
    if (!separate()) return ok_status();
    H3_TRY(compute_done_.record(ctx.stream()));
    return compute_done_.make_wait(lane_ctx_.stream());
}

Status CommLane::mark(int mark) {
    if (!separate()) return ok_status();
    if (mark < 0) return invalid_argument("CommLane::mark: negative mark " + std::to_string(mark));
    while (marks_.size() <= static_cast<size_t>(mark)) {
        H3_ASSIGN_OR_RETURN(DeviceEvent e, DeviceEvent::create(lane_ctx_.device));
        marks_.push_back(std::move(e));
    }
    return marks_[static_cast<size_t>(mark)].record(lane_ctx_.stream());
}

Status CommLane::wait_mark(const Context& ctx, int mark) {
    if (!separate()) return ok_status();
    if (mark < 0 || static_cast<size_t>(mark) >= marks_.size())
        return invalid_argument("CommLane::wait_mark: mark " + std::to_string(mark) + " was never made");
    return marks_[static_cast<size_t>(mark)].make_wait(ctx.stream());
}

} // namespace h3::ops
