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

// An activation rounded to e4m3 per row, x ≈ data[m, :] · scale[m] with scale[m] = fp8_block_scale(max
// |x[m, :]|): quantize_rows_fp8's output, or a fused producer's (ops/fp8_fused.h). gemm_fp8 takes it as is.
struct Fp8Activation {
    Tensor data;  // [M, K] f8_e4m3
    Tensor scale; // [M] f32
    bool defined() const { return data.defined(); }
    // Rows [begin, end) of both.
    Fp8Activation rows(int64_t begin, int64_t end) const {
        return {data.slice(0, begin, end), scale.slice(0, begin, end)};
    }
};

// x [M, K] (f32/bf16/f16, contiguous) rounded to e4m3 per row into out.data [M, K] f8_e4m3 and out.scale
// [M] f32 (allocated by the caller on ctx's device): the rounding gemm_fp8 applies to its x.
Status quantize_rows_fp8(const Context& ctx, const Tensor& x, Fp8Activation& out);

// x [M, K] bf16 is rounded to e4m3 per row (x_scale[m] = fp8_block_scale(max |x[m, :]|)); the product is
// accumulated in fp32, scaled by x_scale[m]·w_scale[n], bias [N] (f32/bf16, optional) added in fp32, and
// rounded once into y [M, N] (bf16 or f32). CUDA: cuBLASLt e4m3 on sm_89+ (outer-vector scales where it
// has them, else an fp32 product and one finishing pass); CPU: the reference. K must be a multiple of 16 on
// CUDA (cuBLASLt's fp8 rule).
Status gemm_fp8(const Context& ctx, const Fp8GemmParams& p, const Tensor& x, const Fp8Weight& w,
                const Tensor& bias, Tensor& y);
// The same on an activation already rounded (no quantization pass): equal to gemm_fp8 on the tensor x was
// rounded from. K must be a multiple of 16 on CUDA.
Status gemm_fp8(const Context& ctx, const Fp8GemmParams& p, const Fp8Activation& x, const Fp8Weight& w,
                const Tensor& bias, Tensor& y);

} // namespace h3::ops
