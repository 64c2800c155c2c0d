// Weight-only int8 (W8A16): symmetric per output channel, fp32 scales. See ops.h for the shared conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// w[n, k] = fp32(q[n, k]) · scale[n], rounded once to w's dtype (one fp32 product, no fma, so the CPU
// reference and the CUDA kernel agree bit for bit). q i8 [N, K], scale f32 [N], w [N, K] f32/bf16/f16, all
// contiguous — a weight matrix in the PyTorch Linear layout, dequantized before the GEMM that reads it.
Status dequantize_rows(const Context& ctx, const Tensor& q, const Tensor& scale, Tensor& w);

// Sets flag (i32 [1], may be one entry of a larger vector) to 1 when x (any float dtype, contiguous) holds an
// inf or NaN; leaves it unchanged otherwise, so one flag can collect several checks. The host reads the flags
// later, once: the check itself never synchronizes (fp16 activation overflow detection).
Status mark_nonfinite(const Context& ctx, const Tensor& x, Tensor& flag);

} // namespace h3::ops
