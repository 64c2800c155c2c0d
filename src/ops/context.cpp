#include "ops/context.h"

#include "core/cuda_api.h"

#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_context.h"
#endif

namespace h3::ops {

void* Context::stream() const {
#ifdef H3_WITH_CUDA
    return cuda ? cuda->stream() : nullptr;
#else
    return nullptr;
#endif
}

Status synchronize(const Context& ctx) {
    if (!ctx.is_cuda()) return ok_status();
    if (!ctx.cuda) return invalid_argument("synchronize: a CUDA context without its CudaContext");
    return cuda::stream_synchronize(ctx.stream());
}

} // namespace h3::ops
