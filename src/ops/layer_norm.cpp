// layer_norm dispatcher.
#include "ops/layer_norm.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace h3::ops {

using namespace detail;

Status layer_norm(const Context& ctx, const LayerNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y) {
    const char* op = "layer_norm";
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
    if (bias.defined()) {
        H3_TRY(check_float_contig(op, "bias", ctx, bias));
        H3_TRY(check_shape(op, "bias", bias, Shape{x.dim(1)}, "x's last dim"));
    }
    if (!(p.eps >= 0.0f) || !std::isfinite(p.eps))
        return invalid_argument("layer_norm: eps = " + std::to_string(p.eps) + " must be finite and >= 0");
    H3_OPS_DISPATCH(layer_norm, ctx, p, x, weight, bias, y);
}

} // namespace h3::ops
