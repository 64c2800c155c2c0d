// 3-D convolution over [B, C, T, H, W] videos (the video VAE encoder's causal convolutions). See ops.h for
// the shared conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// How the spatial border is padded (PyTorch F.pad modes): zeros ("constant"), reflect (mirror without
// repeating the edge, needs pad < size), replicate (repeat the edge).
enum class PadMode { kZeros, kReflect, kReplicate };

// An optional transform of the convolution's input, the video encoder's GroupNorm + SiLU in front of a
// convolution: the convolution reads u = x·scale[b, t, ci] + shift[b, t, ci] (then SiLU when `silu`) instead
// of x, exactly as group_norm_apply (ops/group_norm.h) computes it, with scale / shift from group_norm_stats.
// The padding comes after the transform, as PyTorch pads the activation: the zero border and the causal front
// frames are zeros of u; reflect / replicate padding reads the mirrored voxel of x and transforms it.
struct Conv3dInputTransform {
    Tensor scale; // [B, T, Cin] f32 on ctx's device
    Tensor shift; // [B, T, Cin] f32
    bool silu = false;
};

// PyTorch Conv3d over an explicitly padded input: `pad_front` zero frames before the first frame and none
// after (causal), spatial padding per side in `spatial_mode`, then a convolution with no padding of its own.
// Dilation 1, groups 1.
struct Conv3dParams {
    int stride_t = 1, stride_h = 1, stride_w = 1;
    int pad_front = 0;                                            // zero frames in front (temporal, causal)
    int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0; // spatial, in `spatial_mode`
    PadMode spatial_mode = PadMode::kZeros;
    const Conv3dInputTransform* input = nullptr; // applied to x before the padding (null: none)
    // Added to the result: y = conv3d(x) + bias + residual, each sum rounded to fp32 in that order (the same
    // bits as the convolution followed by ops::add). [B, Cout, To, Ho, Wo] f32 on ctx's device, not aliasing
    // y; the Hopper GEMM adds it in its epilogue, every other path adds it after the convolution.
    const Tensor* residual = nullptr;
};

// x [B, Cin, T, H, W], w [Cout, Cin, KT, KH, KW], bias [Cout] or undefined, y [B, Cout, To, Ho, Wo] with
// To = (T + pad_front − KT)/stride_t + 1, Ho = (H + pad_top + pad_bottom − KH)/stride_h + 1, likewise Wo.
// f32 only (the encoder runs in fp32, as the reference does); fp32 accumulation. On CUDA with
// ctx.allow_tf32 the products use tensor cores with operands rounded to 10-bit mantissas, as PyTorch's cuDNN
// convolutions do by default: on sm_80+ fp16 operands over a channels-last copy (fp16's
// range: |values| beyond 65504 become inf, below 6.1e-5 lose relative precision), else TF32; H3_CONV3D picks
// another path (cuda/cuda_context.h). Without allow_tf32, and on the CPU, always fp32. Kernel taps that fall
// on the zero frames in front contribute nothing and are skipped (a single frame through a 3×3×3 causal
// convolution costs one 3×3 tap set, not three). With p.input set, y = conv3d(u) for the transformed u: the
// CUDA fp16 path applies the transform in its pass that converts x to fp16 (no extra traffic); the CPU
// reference and the other CUDA paths materialize u with group_norm_apply first (a temporary of x's size), so
// every path computes the same function as group_norm_apply followed by conv3d.
Status conv3d(const Context& ctx, const Conv3dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y);
// [B, Cout, To, Ho, Wo] for x [B, Cin, T, H, W] and w [Cout, Cin, KT, KH, KW]; an empty shape when some
// output extent would be < 1.
Shape conv3d_out_shape(const Shape& x, const Shape& w, const Conv3dParams& p);

} // namespace h3::ops
