// Producers fused with the fp8 row quantization (quantize_rows_fp8, ops/gemm_fp8.h): the bf16 value the
// producer would store, then its row's e4m3 bytes and power-of-two scale, in the same bytes as running the
// producer into a bf16 tensor and quantize_rows_fp8 on that. On CUDA one pass per row (the bf16 row stays
// on chip: the intermediate never crosses HBM). See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/adaln.h"
#include "ops/context.h"
#include "ops/gemm_fp8.h"
#include "ops/norm.h"

namespace h3::ops {

// rms_norm_modulate(np, mp, x, weight, shift, scale, row) into a bf16 y (exactly as that op stores it), then
// quantize_rows_fp8(y): x [S, D] bf16, out.data [S, D] f8_e4m3, out.scale [S] f32 (caller-allocated on ctx's
// device). Rows the op skips (a device row index outside the tables; host indices are checked) come out as
// zeros with the scale of a zero row (1).
Status rms_norm_modulate_fp8(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                             const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                             const Tensor& row, Fp8Activation& out);
// rms_norm(np, x, weight) into a bf16 y (exactly as that op stores it), then quantize_rows_fp8(y): x [S, D]
// (f32, bf16 or f16), weight [D] or undefined, out.data [S, D] f8_e4m3, out.scale [S] f32 (caller-allocated
// on ctx's device).
Status rms_norm_fp8(const Context& ctx, const RmsNormParams& np, const Tensor& x, const Tensor& weight,
                    Fp8Activation& out);
// gated_residual_rms_norm(gp, np, h, gate, y, row, norm_weight) with a bf16 out (h updated in place exactly
// as that op updates it), then quantize_rows_fp8(out): h [S, D] (any float dtype), y [S, D], out.data [S, D]
// f8_e4m3, out.scale [S] f32. Rows the op skips (a device row index outside the gate table; host indices are
// checked) leave h as it was and come out as zeros with the scale of a zero row (1).
Status gated_residual_rms_norm_fp8(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                                   Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                                   const Tensor& norm_weight, Fp8Activation& out);
// swiglu(h) into bf16 (as swiglu stores it), then quantize_rows_fp8: h [n, 2F] bf16 = [value | gate] per
// row -> out.data [n, F] f8_e4m3, out.scale [n] f32 (caller-allocated on ctx's device).
Status swiglu_fp8(const Context& ctx, const Tensor& h, Fp8Activation& out);

} // namespace h3::ops
