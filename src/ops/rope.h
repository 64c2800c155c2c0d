// RoPE (rotate-half). See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// Applied on the first `rotary_dim` channels of each head, in place.
// x [S, H, Dh] (contiguous), cos/sin [S, rotary_dim] (f32 or x's dtype). For c < rotary_dim/2:
//   x[c]' = x[c]·cos[c] − x[c+half]·sin[c];  x[c+half]' = x[c+half]·cos[c+half] + x[c]·sin[c+half].
// Channels >= rotary_dim pass through. With `round_tables` (bf16 emulation of eager PyTorch) the tables are
// rounded to x's dtype first and each product x·cos, rotate_half(x)·sin is rounded before the sum.
struct RopeParams {
    int rotary_dim = 0;
    bool round_tables = false;
};
Status rope(const Context& ctx, const RopeParams& p, Tensor& x, const Tensor& cos, const Tensor& sin);

} // namespace h3::ops
