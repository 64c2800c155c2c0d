#include "bench/device_report.h"

#include "ops/cuda/cuda_context.h"

namespace h3::bench {

bool gemm_autotune(const ops::Context& ctx) {
    return ctx.is_cuda() && ctx.cuda && ctx.cuda->gemm_autotune();
}

std::string conv3d_backend(const ops::Context& ctx) {
#if defined(H3_WITH_CUDA)
    if (ctx.is_cuda() && ctx.cuda) return ops::conv3d_impl_name(ctx.cuda->conv3d_impl());
#endif
    return "cpu";
}

} // namespace h3::bench
