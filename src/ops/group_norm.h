// GroupNorm applied per frame of a [B, C, T, H, W] video (time folded into the batch), optionally fused with
// SiLU; and the same split in two — the per-(b, t, channel) affine from the group statistics, then its
// application — so that a consumer (conv3d's input transform, ops/conv3d.h) can apply it while it reads x.
// See ops.h for the shared conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

struct GroupNormParams {
    int groups = 32;
    float eps = 1e-6f;
    bool silu = false; // y = SiLU(normalized · weight + bias)
};

// For every (b, t) and group g of C/groups consecutive channels: mean and biased variance over those
// channels × H × W, y = (x − mean)/sqrt(var + eps) · weight[c] + bias[c] (then SiLU). x, y [B, C, T, H, W]
// f32 (y may be x: in place); weight, bias [C] f32 or undefined. Statistics in fp32 or better.
Status group_norm(const Context& ctx, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y);

// The affine group_norm applies, per (b, t, c): scale[b, t, c] = rstd·weight[c] and shift[b, t, c] =
// bias[c] − mean·rstd·weight[c] (mean and rstd of c's group in frame t of batch b, computed in double, each
// result rounded to fp32 once), so that group_norm(x) = group_norm_apply(x, scale, shift) with p.silu. x
// [B, C, T, H, W] f32; weight, bias [C] f32 or undefined; scale, shift [B, T, C] f32. p.silu is not read.
// CPU: group_norm's own statistics, so the composition equals group_norm bit for bit. CUDA: one pass over x
// (double sums of x − pivot and of its square, the pivot being the group's first value), so scale and shift
// may differ from CUDA group_norm's two-pass statistics in their last bit.
Status group_norm_stats(const Context& ctx, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, Tensor& scale, Tensor& shift);

struct GroupNormApplyParams {
    bool silu = false; // then y = SiLU(v)
};
// y[b, c, t, h, w] = v = x[b, c, t, h, w]·scale[b, t, c] + shift[b, t, c], the product and the sum each
// rounded to fp32 (group_norm's last step), then SiLU v/(1 + exp(−v)) when p.silu. x, y [B, C, T, H, W] f32
// (y may be x); scale, shift [B, T, C] f32.
Status group_norm_apply(const Context& ctx, const GroupNormApplyParams& p, const Tensor& x,
                        const Tensor& scale, const Tensor& shift, Tensor& y);

} // namespace h3::ops
