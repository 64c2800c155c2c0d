// conv3d's implicit GEMM on Hopper warpgroup MMAs (conv3d_wgmma.cu, sm_90a; private to ops/cuda). It reads
// the same operands as conv3d_f16's mma.sync GEMM — the fp16 channels-last padded input and the fp16
// [Cout, taps·Cp] weights that conv3d_f16_launch prepares — and writes the same fp32 output, so the two
// GEMMs are interchangeable behind one pad/convert. Plain C++ over the CUDA runtime (no Tensor, no Status).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace h3::ops::cuda_detail {

// One conv3d GEMM over prepared operands (extents as in ops/conv3d.h).
struct Conv3dGemmOperands {
    const void* xp = nullptr;        // fp16 [B, T, Hp, Wp, Cp], channels last, spatial border already padded
    const void* w16 = nullptr;       // fp16 [Cout, taps·Cp], k = tap·Cp + ci, tap = (kt·KH + kh)·KW + kw
    const float* bias = nullptr;     // [Cout] or null
    float* y = nullptr;              // f32 [B, Cout, To, Ho, Wo]
    const float* residual = nullptr; // f32 like y, added after the bias (Conv3dParams::residual), or null
    int b = 0, cp = 0;               // batch; the padded channel count of xp and w16
    int t = 0, hp = 0, wp = 0;       // xp's frames and padded extents
    int cout = 0, kt = 0, kh = 0, kw = 0;
    int to = 0, ho = 0, wo = 0;
    int st = 1, sh = 1, sw = 1;
    int pad_front = 0; // causal zero frames in front (their taps are skipped)
};

// Whether the wgmma GEMM can run these operands: Cp a multiple of 64 (each K step is one 64-channel run of
// one tap, 128 bytes per row), offsets within int32 per frame, the grid within CUDA's limits. The caller
// also needs an sm_90a build on a cc 9.0 device (hopper_kernels_usable).
bool conv3d_wgmma_eligible(const Conv3dGemmOperands& g);
// How many CTAs the GEMM launches (the dispatcher prefers it only when they fill the device).
int64_t conv3d_wgmma_ctas(const Conv3dGemmOperands& g);

// Enqueues the GEMM on `stream`; returns the launch error (cudaSuccess: launched).
cudaError_t conv3d_wgmma_launch(const Conv3dGemmOperands& g, cudaStream_t stream);

} // namespace h3::ops::cuda_detail
