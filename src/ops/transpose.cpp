// transpose dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/transpose.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

Status transpose(const Context& ctx, const Tensor& x, Tensor& y) {
    const char* op = "transpose";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tensor(op, "x", ctx, x));
    H3_TRY(check_tensor(op, "y", ctx, y));
    H3_TRY(check_contiguous(op, "x", x));
    H3_TRY(check_contiguous(op, "y", y));
    H3_TRY(check_writable(op, "y", y));
    if (x.rank() != 2 && x.rank() != 3)
        return invalid_argument("transpose: x is " + desc(x) + " but must be [M, N] or [B, M, N]");
    if (y.dtype() != x.dtype())
        return invalid_argument("transpose: y is " + desc(y) + " but x is " + desc(x) +
                                "; dtypes must match");
    const int r = x.rank();
    const Shape want = r == 2 ? Shape{x.dim(1), x.dim(0)} : Shape{x.dim(0), x.dim(2), x.dim(1)};
    H3_TRY(check_shape(op, "y", y, want, "x with its last two dims swapped"));
    if (x.numel() > 0 && x.data() == y.data()) return invalid_argument("transpose: x and y must not alias");
    H3_OPS_DISPATCH(transpose, ctx, x, y);
}

} // namespace h3::ops
