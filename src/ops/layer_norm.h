// LayerNorm over the last dim. See ops.h for the shared conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// y = (x − mean(x)) / sqrt(var(x) + eps) (· weight) (+ bias), biased variance, math in fp32.
// x [R, D] and y [R, D] any float dtypes; weight, bias [D] (any float dtype) or undefined.
struct LayerNormParams {
    float eps = 1e-5f;
};
Status layer_norm(const Context& ctx, const LayerNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y);

} // namespace h3::ops
