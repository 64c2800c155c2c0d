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

} // namespace h3::ops
