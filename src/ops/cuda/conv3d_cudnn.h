// conv3d through cuDNN's convolution (private to ops/cuda): the helpers conv3d.cu provides to
// conv3d_cudnn.cpp and the entry conv3d.cu calls.
#pragma once

#include "ops/conv3d.h"
#include "ops/cuda/cuda_common.h"

namespace h3::ops::cuda_detail {

// xp [B, C, T + front, H + top + bottom, W + left + right] from x [B, C, T, H, W]: `front` zero frames, the
// spatial border in `mode` (conv3d's padding, materialized for cuDNN, which pads only with zeros and
// symmetrically).
Status conv3d_pad_input(const Context& ctx, const Tensor& x, int front, int top, int bottom, int left,
                        int right, PadMode mode, float* xp);
// wt [Cout, Cin, KT − first, KH, KW] = w[:, :, first:] (temporal taps that only ever meet the causal zero
// frames dropped).
Status conv3d_slice_taps(const Context& ctx, const Tensor& w, int first, float* wt);

// y = conv3d(x, w) + bias through cuDNN in channels-last layout (operands transposed through the context's
// scratch): TF32 tensor-core algorithms with ctx.allow_tf32, FMA-only ones otherwise; only the GEMM-family
// algorithms (no FFT or Winograd). `ran` is false when cuDNN offers no usable algorithm for the problem
// (cached) or the shape is beyond its descriptors, and the caller runs its own kernels.
Status cudnn_conv3d(const Context& ctx, const Conv3dParams& p, const Tensor& x, const Tensor& w,
                    const Tensor& bias, Tensor& y, bool& ran);

} // namespace h3::ops::cuda_detail
