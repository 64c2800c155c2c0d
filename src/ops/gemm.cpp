// gemm dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/gemm.h"
#include "ops/provenance.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

Status gemm(const Context& ctx, const GemmParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
            Tensor& y) {
    const char* op = "gemm";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "w", ctx, w));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_rank(op, "x", x, 2));
    H3_TRY(check_rank(op, "w", w, 2));
    H3_TRY(check_rank(op, "y", y, 2));
    if (w.dtype() != x.dtype())
        return invalid_argument("gemm: w is " + desc(w) + " but x is " + desc(x) +
                                "; x and w must share a dtype");
    const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
    if (w.dim(1) != k)
        return invalid_argument("gemm: w is " + desc(w) + " but x has K = " + std::to_string(k));
    H3_TRY(check_shape(op, "y", y, Shape{m, n}, "[x rows, w rows]"));
    if (bias.defined()) {
        H3_TRY(check_float_contig(op, "bias", ctx, bias));
        H3_TRY(check_shape(op, "bias", bias, Shape{n}, "w rows"));
    }
    note_impl(OpFamily::kGemm, gemm_impl_name(ctx.is_cuda(), x.dtype()));
    H3_OPS_DISPATCH(gemm, ctx, p, x, w, bias, y);
}

} // namespace h3::ops
