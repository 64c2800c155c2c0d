// Batched matrix transpose (layout changes between channel-first signals and row-major activations, e.g. the
// audio VAE encoder's [C, T] trunk output → [T, C] rows for LayerNorm / attention). See ops.h for the shared
// conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// y[b, j, i] = x[b, i, j]: x [B, M, N] → y [B, N, M], or x [M, N] → y [N, M]. Any dtype (bits are copied, x
// and y share the dtype); both contiguous; y must not alias x.
Status transpose(const Context& ctx, const Tensor& x, Tensor& y);

} // namespace h3::ops
