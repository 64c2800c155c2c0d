// conv3d on fp16 tensor cores (conv3d_f16.cu, private to ops/cuda): the problem description and the raw
// launches conv3d.cu wraps. Plain C++ over the CUDA runtime only (no Tensor, no Status), so the kernels can
// also be driven by a standalone harness.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace h3::ops::cuda_detail {

// One conv3d call as conv3d_f16 sees it (extents as in ops/conv3d.h; mode: 0 zeros, 1 reflect, 2 replicate).
struct Conv3dF16Problem {
    int b, cin, t, h, w;  // x [B, Cin, T, H, W]
    int cout, kt, kh, kw; // w [Cout, Cin, KT, KH, KW]
    int to, ho, wo;       // y [B, Cout, To, Ho, Wo]
    int st, sh, sw;       // strides
    int pad_front;        // causal zero frames (never materialized: their taps are skipped)
    int pad_top, pad_bottom, pad_left, pad_right, mode;
};

// The optional input transform (ops::Conv3dInputTransform): the GEMM reads u = x·scale[b, t, ci] +
// shift[b, t, ci] (then SiLU), applied by pad_convert to the real voxels before the padding; the zero border
// stays zero. scale / shift [B, T, Cin] f32 device arrays, or both null (u = x).
struct Conv3dF16Transform {
    const float* scale = nullptr;
    const float* shift = nullptr;
    bool silu = false;
};

// Which implicit GEMM runs after the two conversions: mma.sync m16n8k16 (sm_80+, any padded Cin) or the
// Hopper warpgroup-MMA GEMM of conv3d_wgmma.cu (sm_90a builds on cc 9.0; padded Cin a multiple of 64).
enum class Conv3dF16Gemm { kMma, kWgmma };

// Whether the wgmma GEMM can run this problem (its operand shapes; the caller checks the device), and how
// many CTAs it would launch.
bool conv3d_f16_wgmma_eligible(const Conv3dF16Problem& p);
int64_t conv3d_f16_wgmma_ctas(const Conv3dF16Problem& p);

// Whether the kernels take this problem: any Cin (the fp16 copies pad it to a multiple of 8 with zero
// channels, so the loads stay 16-byte chunks), every index of the padded copy and of y within int32 per frame
// and the grid within CUDA's limits. The caller also needs cc >= 8.
bool conv3d_f16_eligible(const Conv3dF16Problem& p);

// Scratch the launch carves: the fp16 channels-last padded input, then the fp16 weights (256-byte aligned),
// both with Cin rounded up to a multiple of 8.
size_t conv3d_f16_scratch_bytes(const Conv3dF16Problem& p);

// Enqueues pad/convert, weight convert and the implicit GEMM (`gemm`; kWgmma only where
// conv3d_f16_wgmma_eligible) on `stream`: y = conv3d(u, w) + bias (+ residual) (bias may be null; u = x
// transformed by `in`; `residual`, f32 shaped like y, only with the wgmma GEMM, which adds it in its
// epilogue). `scratch` holds conv3d_f16_scratch_bytes(p). Returns the first launch error and names the kernel
// in *failed (cudaSuccess: all three launched; cudaErrorInvalidValue: a residual with the mma.sync GEMM).
cudaError_t conv3d_f16_launch(const Conv3dF16Problem& p, const Conv3dF16Transform& in, const float* x,
                              const float* w, const float* bias, float* y, void* scratch, cudaStream_t stream,
                              const char** failed, Conv3dF16Gemm gemm = Conv3dF16Gemm::kMma,
                              const float* residual = nullptr);

} // namespace h3::ops::cuda_detail
