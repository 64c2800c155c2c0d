#include "runtime/device_session.h"

#include "core/cuda_api.h"

#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_context.h"
#endif

namespace h3::runtime {

Result<std::unique_ptr<DeviceSession>> DeviceSession::open(const std::string& name) {
    H3_ASSIGN_OR_RETURN(Device d, parse_device(name));
    return open(d);
}

Result<std::unique_ptr<DeviceSession>> DeviceSession::open(Device d) {
    std::unique_ptr<DeviceSession> s(new DeviceSession());
    s->ctx_.device = d;
    if (d.is_cpu()) return s;
#ifdef H3_WITH_CUDA
    int n = cuda::device_count();
    if (d.index >= n)
        return invalid_argument("device " + d.to_string() + ": this machine has " + std::to_string(n) +
                                " CUDA device(s)");
    H3_ASSIGN_OR_RETURN(auto ctx, ops::CudaContext::create(d.index));
    s->cuda_ = std::unique_ptr<ops::CudaContext, void (*)(ops::CudaContext*)>(
        ctx.release(), [](ops::CudaContext* c) { delete c; });
    s->ctx_.cuda = s->cuda_.get();
    return s;
#else
    return invalid_argument("device " + d.to_string() + ": this build has no CUDA backend");
#endif
}

DeviceSession::~DeviceSession() = default;

Status DeviceSession::synchronize() const {
    if (ctx_.device.is_cpu()) return ok_status();
    return cuda::stream_synchronize(ctx_.stream());
}

Status DeviceSession::make_current() const {
    if (ctx_.device.is_cpu()) return ok_status();
    return cuda::set_device(ctx_.device.index);
}

} // namespace h3::runtime
