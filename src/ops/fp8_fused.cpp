// rms_norm_modulate_fp8 / rms_norm_fp8 / gated_residual_rms_norm_fp8 / swiglu_fp8 dispatchers: validation,
// then the CPU reference or the CUDA implementation.
#include "ops/fp8_fused.h"
#include "ops/provenance.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <algorithm>
#include <cmath>

namespace h3::ops {

using namespace detail;

namespace {

// A contiguous [rows, cols] bf16 input (the only dtype the fused producers read).
Status check_bf16_matrix(const char* op, const char* name, const Context& ctx, const Tensor& t) {
    H3_TRY(check_tensor(op, name, ctx, t));
    H3_TRY(check_rank(op, name, t, 2));
    if (t.dtype() != DType::kBF16)
        return invalid_argument(std::string(op) + ": " + name + " is " + desc(t) + " but must be bf16");
    return check_contiguous(op, name, t);
}

// A norm's input x [rows, d] (any float dtype), its weight [d] (or undefined) and eps.
Status check_norm_input(const char* op, const Context& ctx, const RmsNormParams& np, const Tensor& x,
                        const Tensor& weight, const char* x_name, const char* weight_name) {
    H3_TRY(check_float_contig(op, x_name, ctx, x));
    H3_TRY(check_rank(op, x_name, x, 2));
    if (weight.defined()) {
        H3_TRY(check_float_contig(op, weight_name, ctx, weight));
        H3_TRY(check_shape(op, weight_name, weight, Shape{x.dim(1)}, std::string(x_name) + "'s last dim"));
    }
    if (!(np.eps >= 0.0f) || !std::isfinite(np.eps))
        return invalid_argument(std::string(op) + ": eps = " + std::to_string(np.eps) +
                                " must be finite and >= 0");
    return ok_status();
}

// A writable contiguous tensor of `dtype` and `shape` on ctx's device.
Status check_output(const char* op, const char* name, const Context& ctx, const Tensor& t, DType dtype,
                    const Shape& shape, const std::string& why) {
    H3_TRY(check_tensor(op, name, ctx, t));
    if (t.dtype() != dtype)
        return invalid_argument(std::string(op) + ": " + name + " is " + desc(t) + " but must be " +
                                dtype_name(dtype));
    H3_TRY(check_shape(op, name, t, shape, why));
    H3_TRY(check_contiguous(op, name, t));
    return check_writable(op, name, t);
}

} // namespace

Status detail::check_fp8_out(const char* op, const Context& ctx, const Fp8Activation& out, int64_t rows,
                             int64_t cols, const std::string& why) {
    H3_TRY(check_output(op, "out.data", ctx, out.data, DType::kF8E4M3, Shape{rows, cols}, why));
    return check_output(op, "out.scale", ctx, out.scale, DType::kF32, Shape{rows}, "one scale per row");
}

Status rms_norm_modulate_fp8(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                             const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                             const Tensor& row, Fp8Activation& out) {
    const char* op = "rms_norm_modulate_fp8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_bf16_matrix(op, "x", ctx, x));
    const int64_t s = x.dim(0), d = x.dim(1);
    if (weight.defined()) {
        H3_TRY(check_float_contig(op, "weight", ctx, weight));
        H3_TRY(check_shape(op, "weight", weight, Shape{d}, "x's last dim"));
    }
    if (!(np.eps >= 0.0f) || !std::isfinite(np.eps))
        return invalid_argument(std::string(op) + ": eps = " + std::to_string(np.eps) +
                                " must be finite and >= 0");
    H3_TRY(check_table(op, "shift", ctx, shift, d, "x's last dim"));
    H3_TRY(check_table(op, "scale", ctx, scale, d, "x's last dim"));
    H3_TRY(check_index(op, "row", ctx, row, s, "one table row per x row"));
    H3_TRY(check_index_values(op, "row", row, std::min(shift.dim(0), scale.dim(0)),
                              "table rows of shift/scale"));
    H3_TRY(check_fp8_out(op, ctx, out, s, d, "x's shape"));
    note_impl(OpFamily::kFp8Quantization, "fused");
    H3_OPS_DISPATCH(rms_norm_modulate_fp8, ctx, np, mp, x, weight, shift, scale, row, out);
}

Status rms_norm_fp8(const Context& ctx, const RmsNormParams& np, const Tensor& x, const Tensor& weight,
                    Fp8Activation& out) {
    const char* op = "rms_norm_fp8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_norm_input(op, ctx, np, x, weight, "x", "weight"));
    H3_TRY(check_fp8_out(op, ctx, out, x.dim(0), x.dim(1), "x's shape"));
    note_impl(OpFamily::kFp8Quantization, "fused");
    H3_OPS_DISPATCH(rms_norm_fp8, ctx, np, x, weight, out);
}

Status gated_residual_rms_norm_fp8(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                                   Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                                   const Tensor& norm_weight, Fp8Activation& out) {
    const char* op = "gated_residual_rms_norm_fp8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_gated_residual_args(op, ctx, h, gate, y, row));
    H3_TRY(check_norm_input(op, ctx, np, h, norm_weight, "h", "norm_weight"));
    H3_TRY(check_fp8_out(op, ctx, out, h.dim(0), h.dim(1), "h's shape"));
    note_impl(OpFamily::kFp8Quantization, "fused");
    H3_OPS_DISPATCH(gated_residual_rms_norm_fp8, ctx, gp, np, h, gate, y, row, norm_weight, out);
}

Status swiglu_fp8(const Context& ctx, const Tensor& h, Fp8Activation& out) {
    const char* op = "swiglu_fp8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_bf16_matrix(op, "h", ctx, h));
    if (h.dim(1) % 2 != 0)
        return invalid_argument(std::string(op) + ": h is " + desc(h) +
                                " but its last dim must be even ([value | gate])");
    H3_TRY(check_fp8_out(op, ctx, out, h.dim(0), h.dim(1) / 2, "[h rows, h cols / 2]"));
    note_impl(OpFamily::kFp8Quantization, "fused");
    H3_OPS_DISPATCH(swiglu_fp8, ctx, h, out);
}

} // namespace h3::ops
