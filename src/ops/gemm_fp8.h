// e4m3 GEMM (the opt-in fp8 path; lossy): y = (x8·w8ᵀ)·x_scale[row]·w_scale[col] (+ bias). See ops.h for
// the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// A linear layer's weight [N, K] in e4m3 with one power-of-two scale per output channel (row):
// w ≈ data[n, :] · scale[n], scale[n] = fp8_block_scale(max |w[n, :]|) (ops/fp8_scale.h).
struct Fp8Weight {
    Tensor data;  // [N, K] f8_e4m3
    Tensor scale; // [N] f32
    bool defined() const { return data.defined(); }
};

// Quantizes a float weight [N, K] (f32/bf16/f16) on ctx's device into a new Fp8Weight there.
Result<Fp8Weight> quantize_weight_fp8(const Context& ctx, const Tensor& w);

struct Fp8GemmParams {
    // cuBLASLt's fast fp8 accumulation (no periodic promotion of the tensor cores' partial sums to fp32):
    // faster, less exact over long K. Ignored on the CPU, which sums in double.
    bool fast_accum = false;
};

// x [M, K] bf16 is rounded to e4m3 per row (x_scale[m] = fp8_block_scale(max |x[m, :]|)); the product is
// accumulated in fp32, scaled by x_scale[m]·w_scale[n], bias [N] (f32/bf16, optional) added in fp32, and
// rounded once into y [M, N] (bf16 or f32). CUDA: cuBLASLt e4m3 on sm_89+ (outer-vector scales where it
// has them, else an fp32 product and one finishing pass); CPU: the reference. K must be a multiple of 16 on
// CUDA (cuBLASLt's fp8 rule).
Status gemm_fp8(const Context& ctx, const Fp8GemmParams& p, const Tensor& x, const Fp8Weight& w,
                const Tensor& bias, Tensor& y);

} // namespace h3::ops
