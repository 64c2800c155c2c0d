// gemm_fp8 dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/gemm_fp8.h"
#include "ops/provenance.h"

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

namespace {

// a.data [rows, cols] f8_e4m3 and a.scale [rows] f32, contiguous, on ctx's device (writable when `out`);
// errors name them `name`.data / `name`.scale.
Status check_activation(const char* op, const std::string& name, const Context& ctx, const Fp8Activation& a,
                        int64_t rows, int64_t cols, bool out) {
    if (!a.data.defined() || a.data.dtype() != DType::kF8E4M3 || a.data.shape() != Shape{rows, cols})
        return invalid_argument(std::string(op) + ": " + name + ".data must be f8_e4m3[" +
                                std::to_string(rows) + ", " + std::to_string(cols) + "], not " +
                                desc(a.data));
    if (!a.scale.defined() || a.scale.dtype() != DType::kF32 || a.scale.shape() != Shape{rows})
        return invalid_argument(std::string(op) + ": " + name + ".scale must be f32[" + std::to_string(rows) +
                                "], not " + desc(a.scale));
    const std::string data_name = name + ".data", scale_name = name + ".scale";
    for (const auto& [field, t] : {std::pair<const std::string*, const Tensor*>{&data_name, &a.data},
                                   std::pair<const std::string*, const Tensor*>{&scale_name, &a.scale}}) {
        H3_TRY(check_tensor(op, field->c_str(), ctx, *t));
        H3_TRY(check_contiguous(op, field->c_str(), *t));
        if (out) H3_TRY(check_writable(op, field->c_str(), *t));
    }
    return ok_status();
}

// y [M, N] bf16/f32 against the weight [N, K] and an x of M rows and K columns; bias [N] or undefined.
Status check_gemm_operands(const char* op, const Context& ctx, int64_t m, int64_t k, const Fp8Weight& w,
                           const Tensor& bias, const Tensor& y) {
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_rank(op, "y", y, 2));
    if (y.dtype() != DType::kBF16 && y.dtype() != DType::kF32)
        return invalid_argument("gemm_fp8: y is " + desc(y) + " but must be bf16 or f32");
    if (!w.data.defined() || w.data.dtype() != DType::kF8E4M3 || w.data.rank() != 2)
        return invalid_argument(
            "gemm_fp8: the weight must be an [N, K] f8_e4m3 tensor (quantize_weight_fp8)");
    H3_TRY(check_tensor(op, "w.data", ctx, w.data));
    H3_TRY(check_contiguous(op, "w.data", w.data));
    const int64_t n = w.data.dim(0);
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
    return ok_status();
}

} // namespace

Status quantize_rows_fp8(const Context& ctx, const Tensor& x, Fp8Activation& out) {
    const char* op = "quantize_rows_fp8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_rank(op, "x", x, 2));
    H3_TRY(check_activation(op, "out", ctx, out, x.dim(0), x.dim(1), true));
    note_impl(OpFamily::kFp8Quantization, "unfused");
    H3_OPS_DISPATCH(quantize_rows_fp8, ctx, x, out.data, out.scale);
}

Status gemm_fp8(const Context& ctx, const Fp8GemmParams& p, const Fp8Activation& x, const Fp8Weight& w,
                const Tensor& bias, Tensor& y) {
    const char* op = "gemm_fp8";
    H3_TRY(check_context(op, ctx));
    if (!x.data.defined() || x.data.rank() != 2)
        return invalid_argument(
            "gemm_fp8: x.data must be an [M, K] f8_e4m3 tensor (quantize_rows_fp8), not " + desc(x.data));
    H3_TRY(check_activation(op, "x", ctx, x, x.data.dim(0), x.data.dim(1), false));
    H3_TRY(check_gemm_operands(op, ctx, x.data.dim(0), x.data.dim(1), w, bias, y));
    note_impl(OpFamily::kGemm, gemm_impl_name(ctx.is_cuda(), "e4m3"));
    H3_OPS_DISPATCH(gemm_fp8_quantized, ctx, p, x.data, x.scale, w, bias, y);
}

Status gemm_fp8(const Context& ctx, const Fp8GemmParams& p, const Tensor& x, const Fp8Weight& w,
                const Tensor& bias, Tensor& y) {
    const char* op = "gemm_fp8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_rank(op, "x", x, 2));
    if (x.dtype() != DType::kBF16) return invalid_argument("gemm_fp8: x is " + desc(x) + " but must be bf16");
    H3_TRY(check_gemm_operands(op, ctx, x.dim(0), x.dim(1), w, bias, y));
    note_impl(OpFamily::kGemm, gemm_impl_name(ctx.is_cuda(), "e4m3"));
    note_impl(OpFamily::kFp8Quantization, "unfused"); // the bf16 rows rounded inside the GEMM
    H3_OPS_DISPATCH(gemm_fp8, ctx, p, x, w, bias, y);
}

} // namespace h3::ops
