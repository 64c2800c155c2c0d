// Attention. See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// o = softmax(q·kᵀ·scale + mask) v; softmax in fp32.
// q [Sq,H,D], k/v [Sk,Hkv,D], o [Sq,H,D]; q/k/v same dtype (f32, bf16, f16). Grouped-query attention when
// Hkv < H (H divisible by Hkv): query head h reads kv head h / (H/Hkv). `causal` (needs Sq == Sk): query i
// sees keys 0..i only. The DiT uses the default: full, non-causal, Hkv == H.
struct AttentionParams {
    float scale = 0.0f; // 0 => 1/sqrt(D)
    bool causal = false;
};
Status attention(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& o);

} // namespace h3::ops
