// gemm_fp8 dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/gemm_fp8.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

Result<Fp8Weight> quantize_weight_fp8(const Context& ctx, const Tensor& w) {
    const char* op = "quantize_weight_fp8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "w", ctx, w));
    H3_TRY(check_rank(op, "w", w, 2));
    Fp8Weight out;
    H3_ASSIGN_OR_RETURN(out.data, Tensor::empty(w.shape(), DType::kF8E4M3, ctx.device));
    H3_ASSIGN_OR_RETURN(out.scale, Tensor::empty(Shape{w.dim(0)}, DType::kF32, ctx.device));
    if (ctx.is_cuda()) {
#ifdef H3_WITH_CUDA
        H3_TRY(cuda_impl::quantize_rows_fp8(ctx, w, out.data, out.scale));
#else
        return cuda_not_built(op);
#endif
    } else {
        H3_TRY(cpu_impl::quantize_rows_fp8(ctx, w, out.data, out.scale));
    }
    return out;
}

Status gemm_fp8(const Context& ctx, const Fp8GemmParams& p, const Tensor& x, const Fp8Weight& w,
                const Tensor& bias, Tensor& y) {
    const char* op = "gemm_fp8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_rank(op, "x", x, 2));
    H3_TRY(check_rank(op, "y", y, 2));
    if (x.dtype() != DType::kBF16) return invalid_argument("gemm_fp8: x is " + desc(x) + " but must be bf16");
    if (y.dtype() != DType::kBF16 && y.dtype() != DType::kF32)
        return invalid_argument("gemm_fp8: y is " + desc(y) + " but must be bf16 or f32");
    if (!w.data.defined() || w.data.dtype() != DType::kF8E4M3 || w.data.rank() != 2)
        return invalid_argument(
            "gemm_fp8: the weight must be an [N, K] f8_e4m3 tensor (quantize_weight_fp8)");
    H3_TRY(check_tensor(op, "w.data", ctx, w.data));
    H3_TRY(check_contiguous(op, "w.data", w.data));
    const int64_t m = x.dim(0), k = x.dim(1), n = w.data.dim(0);
    if (w.data.dim(1) != k)
        return invalid_argument("gemm_fp8: w is " + desc(w.data) + " but x has K = " + std::to_string(k));
    if (!w.scale.defined() || w.scale.dtype() != DType::kF32 || w.scale.shape() != Shape{n})
        return invalid_argument("gemm_fp8: w.scale must be f32[" + std::to_string(n) + "]");
    H3_TRY(check_tensor(op, "w.scale", ctx, w.scale));
    H3_TRY(check_shape(op, "y", y, Shape{m, n}, "[x rows, w rows]"));
    if (bias.defined()) {
        H3_TRY(check_float_contig(op, "bias", ctx, bias));
        H3_TRY(check_shape(op, "bias", bias, Shape{n}, "w rows"));
    }
    H3_OPS_DISPATCH(gemm_fp8, ctx, p, x, w, bias, y);
}

} // namespace h3::ops
