// euler_update dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/sampling.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace h3::ops {

using namespace detail;

Status euler_update(const Context& ctx, const EulerParams& p, Tensor& x, const Tensor& v) {
    const char* op = "euler_update";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "v", ctx, v));
    H3_TRY(check_writable(op, "x", x));
    if (x.dtype() != DType::kF32 || v.dtype() != DType::kF32)
        return invalid_argument("euler_update: x is " + desc(x) + " and v is " + desc(v) +
                                ", both must be f32");
    H3_TRY(check_shape(op, "v", v, x.shape(), "x's shape"));
    if (!(p.sigma != 0.0f) || !std::isfinite(p.sigma) || !std::isfinite(p.sigma_next) ||
        !std::isfinite(p.timestep))
        return invalid_argument("euler_update: sigma must be finite and non-zero, sigma_next and timestep "
                                "finite (got sigma " +
                                std::to_string(p.sigma) + ")");
    H3_OPS_DISPATCH(euler_update, ctx, p, x, v);
}

} // namespace h3::ops
