// Attention. See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// o = softmax(q·kᵀ·scale) v, full, non-causal, no mask.
// q [Sq,H,D], k/v [Sk,H,D], o [Sq,H,D]; q/k/v same dtype (f32, bf16, f16); softmax in fp32.
struct AttentionParams {
    float scale = 0.0f; // 0 => 1/sqrt(D)
};
Status attention(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& o);

} // namespace h3::ops
