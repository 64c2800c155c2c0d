// RMSNorm over the last dim. See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// y = x / sqrt(mean(x²) + eps) (· weight).
// x [R,D] (any float dtype), weight [D] or undefined (plain norm), y [R,D]. Math in fp32. When
// `round_normed` is set the normalized value is rounded to y's dtype before multiplying by the weight
// (the PyTorch `weight * x.to(dtype)` order).
struct RmsNormParams {
    float eps = 1e-5f;
    bool round_normed = false;
};
Status rms_norm(const Context& ctx, const RmsNormParams& p, const Tensor& x, const Tensor& weight, Tensor& y);

} // namespace h3::ops
