// The compression branch's gate add on one element (ops::vsa_gate_add): o + round(round(oc)·g), rounded to T
// where `round` (the bf16 reference's intermediate rounding), no fused multiply-add — the CPU reference's
// arithmetic. vsa.cu's gate-add kernels and the wgmma block-sparse kernels' fused epilogue
// (vsa_attention_hopper.cu) both use it, so the fused and the separate gate add give the same bytes.
// Private to ops/cuda (.cu files only).
#pragma once

#include "ops/cuda/cuda_kernels.cuh"

namespace h3::ops::cuda_detail {

template <typename T>
__device__ __forceinline__ float vsa_gate_add_one(float o, float oc, float g, bool round) {
    if (round) oc = round_to<T>(oc);
    float prod = __fmul_rn(oc, g);
    if (round) prod = round_to<T>(prod);
    return __fadd_rn(o, prod);
}

} // namespace h3::ops::cuda_detail
