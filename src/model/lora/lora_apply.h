// The two ways an adapter changes a projection, both through ops (CPU reference and CUDA alike):
//   run time  y = x·Wᵀ, then y += scale·(x·Aᵀ)·Bᵀ per factor — the weights stay untouched, so adapters can
//             change per request;
//   merged    W ← round(W + Σ scale·B·A), the sum formed in fp32 from W's value and rounded once — zero cost
//             per forward, for an adapter set fixed for the process (done before any weight quantization).
// Both give the same result within the rounding of W's dtype.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "model/lora/lora_adapter.h"
#include "model/lora/lora_set.h"
#include "ops/context.h"

#include <vector>

namespace h3::model {

// y [S, out] += Σ scale·(x [S, in]·Aᵀ)·Bᵀ. `scratch` is a contiguous buffer of x's dtype with room for
// S × (largest rank) elements; the low-rank product x·Aᵀ is rounded to x's dtype (as PEFT's eager forward
// does), the update accumulates in fp32 into y with one rounding per factor.
Status lora_apply(const ops::Context& ctx, const LoraFactors& factors, const Tensor& x, Tensor& y,
                  const Tensor& scratch);

// One term of a merge: a canonical (host) factor and the user's strength.
struct LoraMergeTerm {
    const LoraFactor* factor = nullptr;
    float strength = 1.0f;
};
// weight [out, in] on ctx's device ← weight + Σ strength·scale·B·A, with the factors widened exactly to fp32,
// the products and the sum in fp32 and one rounding to weight's dtype at the end.
Status lora_merge(const ops::Context& ctx, const std::vector<LoraMergeTerm>& terms, Tensor& weight);

} // namespace h3::model
