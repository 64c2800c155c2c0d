// CPU references of the fused ops: literally the unfused references composed, so the CUDA fast paths are
// tested against exactly the sequence the model would run without fusion.
#include "ops/cpu/cpu_ops.h"

namespace h3::ops::cpu_impl {

Status rms_norm_modulate(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                         const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                         const Tensor& row, Tensor& y) {
    // The normalized value lives in x's dtype, as PyTorch's RMSNorm returns it.
    H3_ASSIGN_OR_RETURN(Tensor normed, Tensor::empty(x.shape(), x.dtype()));
    H3_TRY(cpu_impl::rms_norm(ctx, np, x, weight, normed));
    return cpu_impl::modulate(ctx, mp, normed, shift, scale, row, y);
}

Status head_norm_rope(const Context& ctx, const RmsNormParams& np, const RopeParams& rp, Tensor& x,
                      const Tensor& weight, const Tensor& cos, const Tensor& sin) {
    // Each head is one RMSNorm row of Dh channels; rms_norm reads a row fully before writing it, so in place
    // is safe.
    Tensor heads = x.view({x.dim(0) * x.dim(1), x.dim(2)});
    H3_TRY(cpu_impl::rms_norm(ctx, np, heads, weight, heads));
    if (!cos.defined()) return ok_status();
    return cpu_impl::rope(ctx, rp, x, cos, sin);
}

Status gated_residual_rms_norm(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                               Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                               const Tensor& norm_weight, Tensor& out) {
    // gated_residual has read all of y before rms_norm writes out, so out may alias y.
    H3_TRY(cpu_impl::gated_residual(ctx, gp, h, gate, y, row));
    return cpu_impl::rms_norm(ctx, np, h, norm_weight, out);
}

} // namespace h3::ops::cpu_impl
