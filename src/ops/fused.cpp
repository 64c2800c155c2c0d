// rms_norm_modulate / head_norm_rope / gated_residual_rms_norm dispatchers: validation, then the CPU
// reference or the CUDA implementation.
#include "ops/fused.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace h3::ops {

using namespace detail;

namespace {
Status check_eps(const char* op, float eps) {
    if (!(eps >= 0.0f) || !std::isfinite(eps))
        return invalid_argument(std::string(op) + ": eps = " + std::to_string(eps) +
                                " must be finite and >= 0");
    return ok_status();
}
} // namespace

Status rms_norm_modulate(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                         const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                         const Tensor& row, Tensor& y) {
    const char* op = "rms_norm_modulate";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_rank(op, "x", x, 2));
    if (weight.defined()) {
        H3_TRY(check_float_contig(op, "weight", ctx, weight));
        H3_TRY(check_shape(op, "weight", weight, Shape{x.dim(1)}, "x's last dim"));
    }
    H3_TRY(check_eps(op, np.eps));
    H3_TRY(check_modulate_args(op, ctx, x, shift, scale, row, y));
    H3_OPS_DISPATCH(rms_norm_modulate, ctx, np, mp, x, weight, shift, scale, row, y);
}

Status head_norm_rope(const Context& ctx, const RmsNormParams& np, const RopeParams& rp, Tensor& x,
                      const Tensor& weight, const Tensor& cos, const Tensor& sin) {
    const char* op = "head_norm_rope";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_writable(op, "x", x));
    H3_TRY(check_rank(op, "x", x, 3));
    if (weight.defined()) {
        H3_TRY(check_float_contig(op, "weight", ctx, weight));
        H3_TRY(check_shape(op, "weight", weight, Shape{x.dim(2)}, "x's head dim"));
    }
    H3_TRY(check_eps(op, np.eps));
    RopeParams resolved = rp;
    if (cos.defined() || sin.defined()) {
        if (!cos.defined() || !sin.defined())
            return invalid_argument("head_norm_rope: cos is " + desc(cos) + " and sin is " + desc(sin) +
                                    "; pass both (RoPE) or neither (norm only)");
        H3_TRY(check_rope_args(op, ctx, rp, x, cos, sin, resolved));
    }
    H3_OPS_DISPATCH(head_norm_rope, ctx, np, resolved, x, weight, cos, sin);
}

Status gated_residual_rms_norm(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                               Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                               const Tensor& norm_weight, Tensor& out) {
    const char* op = "gated_residual_rms_norm";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_gated_residual_args(op, ctx, h, gate, y, row));
    H3_TRY(check_rms_norm_args(op, ctx, np, h, norm_weight, out, "h", "norm_weight", "out"));
    if (h.numel() > 0 && out.data() == h.data())
        return invalid_argument("gated_residual_rms_norm: out must not alias h (it may alias y)");
    H3_OPS_DISPATCH(gated_residual_rms_norm, ctx, gp, np, h, gate, y, row, norm_weight, out);
}

} // namespace h3::ops
