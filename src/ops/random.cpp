#include "ops/random.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

Status fill_uniform(const Context& ctx, const FillUniformParams& p, Tensor& x) {
    H3_TRY(detail::check_context("fill_uniform", ctx));
    H3_TRY(detail::check_float_contig("fill_uniform", "x", ctx, x));
    H3_TRY(detail::check_writable("fill_uniform", "x", x));
    if (ctx.is_cuda()) {
#ifdef H3_WITH_CUDA
        return cuda_impl::fill_uniform(ctx, p, x);
#else
        return unimplemented("fill_uniform: this build has no CUDA backend");
#endif
    }
    return cpu_impl::fill_uniform(ctx, p, x);
}

} // namespace h3::ops
