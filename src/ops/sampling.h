// The sampling loop's Euler step on tensors (spec §7), so the loop can keep its latents on the device. See
// ops.h for the shared conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// x ← ratio·x + (1 − ratio)·(x + σ_t·v) with σ_t = 1 − timestep, ratio = σ_next / σ: the reference's
// FlowMatchEulerDiscrete step on the rows being generated. Every product and sum is rounded in fp32 (no fused
// multiply-add), so the CPU reference and CUDA agree bit for bit with pipeline::euler_update.
struct EulerParams {
    float timestep = 0.0f, sigma = 1.0f, sigma_next = 0.0f;
};
// x and v f32, contiguous, the same shape; x is updated in place.
Status euler_update(const Context& ctx, const EulerParams& p, Tensor& x, const Tensor& v);

// The per-element step shared by the CPU reference and pipeline::euler_update (the CUDA kernel spells the
// same operations with explicit round-to-nearest intrinsics).
inline float euler_step(float x, float v, float sigma_t, float ratio, float one_minus) {
    const float sv = sigma_t * v;
    const float denoised = x + sv;
    const float a = ratio * x;
    const float b = one_minus * denoised;
    return a + b;
}

} // namespace h3::ops
