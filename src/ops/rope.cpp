// rope dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/rope.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

namespace detail {

// Shared with head_norm_rope: checks x [S,H,Dh] against cos/sin and resolves rotary_dim (0 => cos.dim(1)).
Status check_rope_args(const char* op, const Context& ctx, const RopeParams& p, const Tensor& x,
                       const Tensor& cos, const Tensor& sin, RopeParams& resolved) {
    H3_TRY(check_float_contig(op, "cos", ctx, cos));
    H3_TRY(check_float_contig(op, "sin", ctx, sin));
    H3_TRY(check_rank(op, "cos", cos, 2));
    H3_TRY(check_shape(op, "sin", sin, cos.shape(), "cos's shape"));
    for (const Tensor* t : {&cos, &sin}) {
        if (t->dtype() != DType::kF32 && t->dtype() != x.dtype())
            return invalid_argument(std::string(op) + ": " + (t == &cos ? "cos" : "sin") + " is " + desc(*t) +
                                    " but must be f32 or x's dtype (" + dtype_name(x.dtype()) + ")");
    }
    resolved = p;
    if (resolved.rotary_dim == 0) resolved.rotary_dim = static_cast<int>(cos.dim(1));
    const int64_t rd = resolved.rotary_dim, dh = x.dim(2);
    if (rd <= 0 || rd % 2 != 0 || rd > dh)
        return invalid_argument(std::string(op) + ": rotary_dim = " + std::to_string(rd) +
                                " must be even, > 0 and <= head dim " + std::to_string(dh) + " (x is " +
                                desc(x) + ")");
    H3_TRY(check_shape(op, "cos", cos, Shape{x.dim(0), rd}, "[x rows S, rotary_dim]"));
    return ok_status();
}

} // namespace detail

using namespace detail;

Status rope(const Context& ctx, const RopeParams& p, Tensor& x, const Tensor& cos, const Tensor& sin) {
    const char* op = "rope";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_writable(op, "x", x));
    H3_TRY(check_rank(op, "x", x, 3));
    RopeParams rp;
    H3_TRY(check_rope_args(op, ctx, p, x, cos, sin, rp));
    H3_OPS_DISPATCH(rope, ctx, rp, x, cos, sin);
}

} // namespace h3::ops
