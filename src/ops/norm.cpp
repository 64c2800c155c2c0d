// rms_norm dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/norm.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace h3::ops {

using namespace detail;

Status rms_norm(const Context& ctx, const RmsNormParams& p, const Tensor& x, const Tensor& weight,
                Tensor& y) {
    const char* op = "rms_norm";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_rank(op, "x", x, 2));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    if (weight.defined()) {
        H3_TRY(check_float_contig(op, "weight", ctx, weight));
        H3_TRY(check_shape(op, "weight", weight, Shape{x.dim(1)}, "x's last dim"));
    }
    if (!(p.eps >= 0.0f) || !std::isfinite(p.eps))
        return invalid_argument("rms_norm: eps = " + std::to_string(p.eps) + " must be finite and >= 0");
    H3_OPS_DISPATCH(rms_norm, ctx, p, x, weight, y);
}

} // namespace h3::ops
