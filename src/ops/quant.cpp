// quant dispatchers: validation, then the CPU reference or the CUDA implementation.
#include "ops/quant.h"
#include "ops/provenance.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

Status dequantize_rows(const Context& ctx, const Tensor& q, const Tensor& scale, Tensor& w) {
    const char* op = "dequantize_rows";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tensor(op, "q", ctx, q));
    H3_TRY(check_tensor(op, "scale", ctx, scale));
    H3_TRY(check_float_contig(op, "w", ctx, w));
    H3_TRY(check_writable(op, "w", w));
    H3_TRY(check_contiguous(op, "q", q));
    H3_TRY(check_contiguous(op, "scale", scale));
    if (q.dtype() != DType::kI8)
        return invalid_argument("dequantize_rows: q is " + desc(q) + ", expected i8");
    if (scale.dtype() != DType::kF32)
        return invalid_argument("dequantize_rows: scale is " + desc(scale) + ", expected f32");
    H3_TRY(check_rank(op, "q", q, 2));
    H3_TRY(check_shape(op, "scale", scale, Shape{q.dim(0)}, "one per row of q"));
    H3_TRY(check_shape(op, "w", w, q.shape(), "q's shape"));
    note_impl(OpFamily::kGemm, "int8-dequantized"); // W8A16: the layer's GEMMs run in w's dtype
    H3_OPS_DISPATCH(dequantize_rows, ctx, q, scale, w);
}

Status mark_nonfinite(const Context& ctx, const Tensor& x, Tensor& flag) {
    const char* op = "mark_nonfinite";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_tensor(op, "flag", ctx, flag));
    H3_TRY(check_writable(op, "flag", flag));
    if (flag.dtype() != DType::kI32 || flag.numel() != 1)
        return invalid_argument("mark_nonfinite: flag is " + desc(flag) + ", expected i32[1]");
    H3_OPS_DISPATCH(mark_nonfinite, ctx, x, flag);
}

} // namespace h3::ops
