// All ops. Each op: a parameter struct, one dispatching entry point (by ctx.device), a CPU reference in
// ops/cpu/<op>.cpp and a CUDA implementation in ops/cuda/<op>.cu. Shapes and dtypes are validated by the
// dispatcher (validate.cpp) and reported as Status, so that the CPU and CUDA halves see only valid input.
//
// Conventions: activations are row-major [rows, cols] (contiguous unless stated); "table" arguments are 2-D
// views whose rows may be strided (stride(0) >= cols, stride(1) == 1) so that AdaLN chunks can be passed
// without copies; row indices are i32 or i64. All reductions accumulate in fp32 (double on the CPU
// reference where cheap). Outputs may have a different float dtype than inputs: the op rounds once, at the
// store.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// ---- GEMM: y = alpha · x·Wᵀ (+ bias) (+ beta·y) --------------------------------------------------------------
// x [M,K], w [N,K] (PyTorch Linear layout), bias [N] or undefined, y [M,N]. x and w share a dtype in
// {f32, bf16, f16}; y in {f32, bf16, f16}; fp32 accumulation. With accumulate = true, y += result.
struct GemmParams {
    float alpha = 1.0f;
    bool accumulate = false;
};
Status gemm(const Context& ctx, const GemmParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
            Tensor& y);

// ---- RMSNorm over the last dim: y = x / sqrt(mean(x²) + eps) (· weight) -----------------------------------
// x [R,D] (any float dtype), weight [D] or undefined (plain norm), y [R,D]. Math in fp32. When
// `round_normed` is set the normalized value is rounded to y's dtype before multiplying by the weight
// (the PyTorch `weight * x.to(dtype)` order).
struct RmsNormParams {
    float eps = 1e-5f;
    bool round_normed = false;
};
Status rms_norm(const Context& ctx, const RmsNormParams& p, const Tensor& x, const Tensor& weight, Tensor& y);

// ---- elementwise -------------------------------------------------------------------------------------------
// y = x · sigmoid(x); x and y same shape, any float dtypes.
Status silu(const Context& ctx, const Tensor& x, Tensor& y);
// SwiGLU: x [R, 2F] = [value | gate] per row, y [R,F] = value ⊙ SiLU(gate).
Status swiglu(const Context& ctx, const Tensor& x, Tensor& y);
// y = cast(x) (same shape; any dtypes; float rounding nearest-even, fp8 saturating).
Status cast(const Context& ctx, const Tensor& x, Tensor& y);
// y = x + z (same shapes).
Status add(const Context& ctx, const Tensor& x, const Tensor& z, Tensor& y);

// ---- RoPE (rotate-half) on the first `rotary_dim` channels of each head, in place --------------------------
// x [S, H, Dh] (contiguous), cos/sin [S, rotary_dim] (f32 or x's dtype). For c < rotary_dim/2:
//   x[c]' = x[c]·cos[c] − x[c+half]·sin[c];  x[c+half]' = x[c+half]·cos[c+half] + x[c]·sin[c+half].
// Channels >= rotary_dim pass through. With `round_tables` the tables are rounded to x's dtype first.
struct RopeParams {
    int rotary_dim = 0;
    bool round_tables = false;
};
Status rope(const Context& ctx, const RopeParams& p, Tensor& x, const Tensor& cos, const Tensor& sin);

// ---- row gather / scatter --------------------------------------------------------------------------------
// dst[i] = src[index[i]]  (src [N,D], index [M], dst [M,D]; dtypes may differ: cast on the way).
Status gather_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst);
// dst[index[i]] = src[i]  (src [M,D], index [M], dst [N,D]).
Status scatter_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst);

// ---- AdaLN ---------------------------------------------------------------------------------------------------
// y[r] = x[r] · (1 + scale[row[r]]) + shift[row[r]]; x [S,D], shift/scale tables [T,D] (strided rows),
// row [S] index into the tables. Math in fp32, one rounding at the store (see DiT precision notes for the
// bf16 emulation flag).
struct ModulateParams {
    bool round_intermediate = false;  // round (1+scale)·x to y's dtype before adding shift (bf16 emulation)
};
Status modulate(const Context& ctx, const ModulateParams& p, const Tensor& x, const Tensor& shift,
                const Tensor& scale, const Tensor& row, Tensor& y);
// h[r] += gate[row[r]] · y[r]; h [S,D] updated in place.
struct GatedResidualParams {
    bool round_intermediate = false;  // round gate·y to h's dtype before the add (bf16 emulation)
};
Status gated_residual(const Context& ctx, const GatedResidualParams& p, Tensor& h, const Tensor& gate,
                      const Tensor& y, const Tensor& row);

// ---- fused (CUDA fast paths; the CPU half composes the unfused references) ---------------------------------
// y = modulate(rms_norm(x; weight), shift, scale, row)
Status rms_norm_modulate(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp, const Tensor& x,
                         const Tensor& weight, const Tensor& shift, const Tensor& scale, const Tensor& row,
                         Tensor& y);
// In place on x [S,H,Dh]: per-head RMSNorm(weight [Dh]) then RoPE (cos/sin may be undefined: no RoPE).
Status head_norm_rope(const Context& ctx, const RmsNormParams& np, const RopeParams& rp, Tensor& x,
                      const Tensor& weight, const Tensor& cos, const Tensor& sin);

// ---- attention: o = softmax(q·kᵀ·scale) v, full, non-causal, no mask ---------------------------------------
// q [Sq,H,D], k/v [Sk,H,D], o [Sq,H,D]; q/k/v same dtype (f32, bf16, f16); softmax in fp32.
struct AttentionParams {
    float scale = 0.0f;  // 0 => 1/sqrt(D)
};
Status attention(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& o);

}  // namespace h3::ops
