// group_norm dispatcher.
#include "ops/group_norm.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace h3::ops {

using namespace detail;

Status group_norm(const Context& ctx, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y) {
    const char* op = "group_norm";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_rank(op, "x", x, 5));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    if (x.dtype() != DType::kF32 || y.dtype() != DType::kF32)
        return invalid_argument("group_norm: x and y must be f32, got " + desc(x) + " and " + desc(y));
    const int64_t c = x.dim(1);
    if (p.groups < 1 || c % p.groups)
        return invalid_argument("group_norm: " + std::to_string(p.groups) + " groups must divide the " +
                                std::to_string(c) + " channels of x " + desc(x));
    if (!(p.eps >= 0.0f) || !std::isfinite(p.eps))
        return invalid_argument("group_norm: eps = " + std::to_string(p.eps) + " must be finite and >= 0");
    for (const auto& [name, t] :
         {std::pair<const char*, const Tensor*>{"weight", &weight}, {"bias", &bias}}) {
        if (!t->defined()) continue;
        H3_TRY(check_float_contig(op, name, ctx, *t));
        if (t->dtype() != DType::kF32)
            return invalid_argument(std::string("group_norm: ") + name + " is " + desc(*t) +
                                    ", expected f32");
        H3_TRY(check_shape(op, name, *t, Shape{c}, "x's channels"));
    }
    H3_OPS_DISPATCH(group_norm, ctx, p, x, weight, bias, y);
}

} // namespace h3::ops
