// 1-D convolutions over [B, C, L] signals (the audio VAE's BigVGAN). See ops.h for the shared conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// PyTorch Conv1d with zero padding: x [B, Cin, L], w [Cout, Cin/groups, K], bias [Cout] or undefined,
// y [B, Cout, Lout] with Lout = (L + 2·padding − dilation·(K−1) − 1)/stride + 1.
// f32 only (the audio decoder runs in fp32: bf16 costs ~20 dB); fp32 accumulation.
struct Conv1dParams {
    int stride = 1;
    int padding = 0;
    int dilation = 1;
    int groups = 1;
};
Status conv1d(const Context& ctx, const Conv1dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y);
int64_t conv1d_out_length(int64_t length, int64_t kernel, const Conv1dParams& p);

// PyTorch ConvTranspose1d (dilation 1, output_padding 0): x [B, Cin, L], w [Cin, Cout/groups, K],
// bias [Cout] or undefined, y [B, Cout, Lout] with Lout = (L−1)·stride − 2·padding + K. f32 only.
struct ConvTranspose1dParams {
    int stride = 1;
    int padding = 0;
    int groups = 1;
};
Status conv_transpose1d(const Context& ctx, const ConvTranspose1dParams& p, const Tensor& x, const Tensor& w,
                        const Tensor& bias, Tensor& y);
int64_t conv_transpose1d_out_length(int64_t length, int64_t kernel, const ConvTranspose1dParams& p);

} // namespace h3::ops
