// GEMM: y = alpha · x·Wᵀ (+ bias) (+ y). See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// x [M,K], w [N,K] (PyTorch Linear layout), bias [N] or undefined, y [M,N]. x and w share a dtype in
// {f32, bf16, f16}; y in {f32, bf16, f16}; fp32 accumulation. With accumulate = true, y += result.
struct GemmParams {
    float alpha = 1.0f;
    bool accumulate = false;
};
Status gemm(const Context& ctx, const GemmParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
            Tensor& y);

} // namespace h3::ops
