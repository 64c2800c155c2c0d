// Fused ops (CUDA fast paths; the CPU half composes the unfused references).
#pragma once

#include "core/tensor.h"
#include "ops/adaln.h"
#include "ops/context.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace h3::ops {

// y = modulate(rms_norm(x; weight), shift, scale, row)
Status rms_norm_modulate(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                         const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                         const Tensor& row, Tensor& y);
// In place on x [S,H,Dh]: per-head RMSNorm(weight [Dh]) then RoPE (cos/sin may be undefined: no RoPE).
Status head_norm_rope(const Context& ctx, const RmsNormParams& np, const RopeParams& rp, Tensor& x,
                      const Tensor& weight, const Tensor& cos, const Tensor& sin);
// gated_residual(h, gate, y, row) then out = rms_norm(h; norm_weight): h [S,D] updated in place as
// gated_residual updates it, out [S,D] the norm of the updated h (norm_weight [D] or undefined). Each
// argument as in the two ops. out may alias y (each row of y is read before that row of out is written), not
// h; on CUDA one pass per row, the norm's sum in another order than rms_norm's.
Status gated_residual_rms_norm(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                               Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                               const Tensor& norm_weight, Tensor& out);

} // namespace h3::ops
