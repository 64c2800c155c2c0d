// CPU references of the producers fused with the fp8 row quantization (ops/fp8_fused.h): literally the
// composition, so the CUDA kernels are tested against the sequence the model would run without fusion.
#include "ops/cpu/cpu_ops.h"

namespace h3::ops::cpu_impl {

Status rms_norm_modulate_fp8(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                             const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                             const Tensor& row, Fp8Activation& out) {
    // Host memory starts zeroed: a row the op skipped would quantize as a zero row.
    H3_ASSIGN_OR_RETURN(Tensor y, Tensor::empty(x.shape(), DType::kBF16));
    H3_TRY(cpu_impl::rms_norm_modulate(ctx, np, mp, x, weight, shift, scale, row, y));
    return cpu_impl::quantize_rows_fp8(ctx, y, out.data, out.scale);
}

Status rms_norm_fp8(const Context& ctx, const RmsNormParams& np, const Tensor& x, const Tensor& weight,
                    Fp8Activation& out) {
    H3_ASSIGN_OR_RETURN(Tensor y, Tensor::empty(x.shape(), DType::kBF16));
    H3_TRY(cpu_impl::rms_norm(ctx, np, x, weight, y));
    return cpu_impl::quantize_rows_fp8(ctx, y, out.data, out.scale);
}

Status gated_residual_rms_norm_fp8(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                                   Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                                   const Tensor& norm_weight, Fp8Activation& out) {
    H3_ASSIGN_OR_RETURN(Tensor normed, Tensor::empty(h.shape(), DType::kBF16));
    H3_TRY(cpu_impl::gated_residual_rms_norm(ctx, gp, np, h, gate, y, row, norm_weight, normed));
    return cpu_impl::quantize_rows_fp8(ctx, normed, out.data, out.scale);
}

Status swiglu_fp8(const Context& ctx, const Tensor& h, Fp8Activation& out) {
    H3_ASSIGN_OR_RETURN(Tensor y, Tensor::empty(Shape{h.dim(0), h.dim(1) / 2}, DType::kBF16));
    H3_TRY(cpu_impl::swiglu(ctx, h, y));
    return cpu_impl::quantize_rows_fp8(ctx, y, out.data, out.scale);
}

} // namespace h3::ops::cpu_impl
