// silu / gelu / swiglu / geglu / cast / add dispatchers: validation, then the CPU reference or the CUDA
// implementation.
#include "ops/elementwise.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

Status silu(const Context& ctx, const Tensor& x, Tensor& y) {
    const char* op = "silu";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    H3_OPS_DISPATCH(silu, ctx, x, y);
}

Status gelu(const Context& ctx, const GeluParams& p, const Tensor& x, Tensor& y) {
    const char* op = "gelu";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    H3_OPS_DISPATCH(gelu, ctx, p, x, y);
}

namespace {

// swiglu / geglu: x [R, 2F] = [value | gate], y [R, F].
Status check_glu_args(const char* op, const Context& ctx, const Tensor& x, const Tensor& y) {
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_rank(op, "x", x, 2));
    if (x.dim(1) % 2 != 0)
        return invalid_argument(std::string(op) + ": x is " + desc(x) +
                                " but its last dim must be even ([value | gate])");
    return check_shape(op, "y", y, Shape{x.dim(0), x.dim(1) / 2}, "[x rows, x cols / 2]");
}

} // namespace

Status swiglu(const Context& ctx, const Tensor& x, Tensor& y) {
    H3_TRY(check_glu_args("swiglu", ctx, x, y));
    H3_OPS_DISPATCH(swiglu, ctx, x, y);
}

Status geglu(const Context& ctx, const GeluParams& p, const Tensor& x, Tensor& y) {
    H3_TRY(check_glu_args("geglu", ctx, x, y));
    H3_OPS_DISPATCH(geglu, ctx, p, x, y);
}

Status cast(const Context& ctx, const Tensor& x, Tensor& y) {
    const char* op = "cast";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tensor(op, "x", ctx, x));
    H3_TRY(check_tensor(op, "y", ctx, y));
    H3_TRY(check_contiguous(op, "x", x));
    H3_TRY(check_contiguous(op, "y", y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    H3_OPS_DISPATCH(cast, ctx, x, y);
}

Status add(const Context& ctx, const Tensor& x, const Tensor& z, Tensor& y) {
    const char* op = "add";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "z", ctx, z));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "z", z, x.shape(), "x's shape"));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    H3_OPS_DISPATCH(add, ctx, x, z, y);
}

Status axpby(const Context& ctx, float alpha, const Tensor& x, float beta, const Tensor& z, Tensor& y) {
    const char* op = "axpby";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "z", ctx, z));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "z", z, x.shape(), "x's shape"));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    H3_OPS_DISPATCH(axpby, ctx, alpha, x, beta, z, y);
}

} // namespace h3::ops
