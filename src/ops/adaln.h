// AdaLN modulation and gated residual. See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// y[r] = x[r] · (1 + scale[row[r]]) + shift[row[r]]; x [S,D], shift/scale tables [T,D] (strided rows),
// row [S] index into the tables. Math in fp32, one rounding at the store (see DiT precision notes for the
// bf16 emulation flag).
struct ModulateParams {
    // bf16 emulation of eager PyTorch: round (1+scale) and (1+scale)·x to y's dtype before adding shift.
    bool round_intermediate = false;
};
Status modulate(const Context& ctx, const ModulateParams& p, const Tensor& x, const Tensor& shift,
                const Tensor& scale, const Tensor& row, Tensor& y);
// h[r] += gate[row[r]] · y[r]; h [S,D] updated in place.
struct GatedResidualParams {
    bool round_intermediate = false; // round gate·y to h's dtype before the add (bf16 emulation)
};
Status gated_residual(const Context& ctx, const GatedResidualParams& p, Tensor& h, const Tensor& gate,
                      const Tensor& y, const Tensor& row);

} // namespace h3::ops
