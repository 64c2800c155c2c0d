// attention_merge dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/attention_merge.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

namespace {

Status check_lse(const char* op, const char* name, const Context& ctx, const Tensor& lse, const Tensor& o) {
    H3_TRY(check_tensor(op, name, ctx, lse));
    H3_TRY(check_contiguous(op, name, lse));
    if (lse.dtype() != DType::kF32)
        return invalid_argument(std::string(op) + ": " + name + " is " + desc(lse) + " but must be f32");
    return check_shape(op, name, lse, Shape{o.dim(0), o.dim(1)}, "[rows, heads] of o_a");
}

} // namespace

Status attention_merge(const Context& ctx, const Tensor& o_a, const Tensor& lse_a, const Tensor& o_b,
                       const Tensor& lse_b, Tensor& o, Tensor& lse) {
    const char* op = "attention_merge";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "o_a", ctx, o_a));
    H3_TRY(check_rank(op, "o_a", o_a, 3));
    H3_TRY(check_float_contig(op, "o_b", ctx, o_b));
    H3_TRY(check_shape(op, "o_b", o_b, o_a.shape(), "o_a's shape"));
    H3_TRY(check_float_contig(op, "o", ctx, o));
    H3_TRY(check_writable(op, "o", o));
    H3_TRY(check_shape(op, "o", o, o_a.shape(), "o_a's shape"));
    H3_TRY(check_lse(op, "lse_a", ctx, lse_a, o_a));
    H3_TRY(check_lse(op, "lse_b", ctx, lse_b, o_a));
    if (lse.defined()) {
        H3_TRY(check_lse(op, "lse", ctx, lse, o_a));
        H3_TRY(check_writable(op, "lse", lse));
    }
    H3_OPS_DISPATCH(attention_merge, ctx, o_a, lse_a, o_b, lse_b, o, lse);
}

} // namespace h3::ops
