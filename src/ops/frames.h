// The video decoder's last step on tensors: its sample (ImageNet-normalized planes) to RGB24 frames, so the
// frames can be made where the sample was assembled and only 8-bit pixels cross to the host. See ops.h for
// the shared conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

#include <array>

namespace h3::ops {

// De-normalization constants per channel (default: ImageNet's, what diffusers' H3 output path uses).
struct SampleToRgb8Params {
    std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
    std::array<float, 3> stddev = {0.229f, 0.224f, 0.225f};
};

// sample [3, F, H, W] f32 -> frames [F, H, W, 3] u8 (on ctx.device; frames contiguous, the sample's channel
// planes each contiguous — a contiguous sample, or a frame range of one, sample.slice(1, a, b): what a
// decode converts clip by clip), per value
//   v = sample[c, f, y, x]·stddev[c] + mean[c]       (product and sum each rounded in fp32, no fma)
//   v = min(1, max(0, v))                             (NaN -> 0)
//   frames[f, y, x, c] = round_half_to_even(v·255)   (numpy's (x·255).round() in fp32)
// CPU and CUDA agree bit for bit.
Status sample_to_rgb8(const Context& ctx, const SampleToRgb8Params& p, const Tensor& sample, Tensor& frames);

} // namespace h3::ops
