// rms_norm dispatcher (and its argument checks, shared with the fused ops): validation, then the CPU
// reference or the CUDA implementation.
#include "ops/norm.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace h3::ops {

namespace detail {

Status check_rms_norm_args(const char* op, const Context& ctx, const RmsNormParams& p, const Tensor& x,
                           const Tensor& weight, const Tensor& y, const char* x_name, const char* weight_name,
                           const char* y_name) {
    const std::string x_shape = std::string(x_name) + "'s shape",
                      x_last = std::string(x_name) + "'s last dim";
    H3_TRY(check_float_contig(op, x_name, ctx, x));
    H3_TRY(check_float_contig(op, y_name, ctx, y));
    H3_TRY(check_writable(op, y_name, y));
    H3_TRY(check_rank(op, x_name, x, 2));
    H3_TRY(check_shape(op, y_name, y, x.shape(), x_shape));
    if (weight.defined()) {
        H3_TRY(check_float_contig(op, weight_name, ctx, weight));
        H3_TRY(check_shape(op, weight_name, weight, Shape{x.dim(1)}, x_last));
    }
    if (!(p.eps >= 0.0f) || !std::isfinite(p.eps))
        return invalid_argument(std::string(op) + ": eps = " + std::to_string(p.eps) +
                                " must be finite and >= 0");
    return ok_status();
}

} // namespace detail

using namespace detail;

Status rms_norm(const Context& ctx, const RmsNormParams& p, const Tensor& x, const Tensor& weight,
                Tensor& y) {
    const char* op = "rms_norm";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_rms_norm_args(op, ctx, p, x, weight, y));
    H3_OPS_DISPATCH(rms_norm, ctx, p, x, weight, y);
}

} // namespace h3::ops
