// Elementwise ops. See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// y = x · sigmoid(x); x and y same shape, any float dtypes.
Status silu(const Context& ctx, const Tensor& x, Tensor& y);
// GELU: y = x·Φ(x) with the exact erf form (torch.nn.GELU()), evaluated as 0.5·x·erfc(−x/√2) — the same
// function as torch's 0.5·x·(1 + erf(x/√2)) without that form's fp32 cancellation for x ≪ 0 — or with `tanh`
// the approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (gelu_pytorch_tanh). fp32 math, one rounding
// at the store; x and y same shape, any float dtypes.
struct GeluParams {
    bool tanh = false;
};
Status gelu(const Context& ctx, const GeluParams& p, const Tensor& x, Tensor& y);
// SwiGLU: x [R, 2F] = [value | gate] per row, y [R,F] = value ⊙ SiLU(gate).
Status swiglu(const Context& ctx, const Tensor& x, Tensor& y);
// GeGLU: x [R, 2F] = [value | gate] per row, y [R, F] = value ⊙ GELU(gate), GELU as in `gelu` (erf or tanh);
// fp32 math, one rounding at the store.
Status geglu(const Context& ctx, const GeluParams& p, const Tensor& x, Tensor& y);
// y = cast(x) (same shape; any dtypes; float rounding nearest-even, fp8 saturating).
Status cast(const Context& ctx, const Tensor& x, Tensor& y);
// y = x + z (same shapes).
Status add(const Context& ctx, const Tensor& x, const Tensor& z, Tensor& y);
// y = alpha·x + beta·z (same shapes), fp32 math with both products rounded before the sum (no fused
// multiply-add, so CPU and CUDA agree bit for bit), one rounding at the store. y may be x or z.
Status axpby(const Context& ctx, float alpha, const Tensor& x, float beta, const Tensor& z, Tensor& y);

} // namespace h3::ops
