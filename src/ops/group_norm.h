// GroupNorm applied per frame of a [B, C, T, H, W] video (time folded into the batch), optionally fused with
// SiLU. See ops.h for the shared conventions.
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

} // namespace h3::ops
