// group_norm / group_norm_stats / group_norm_apply dispatchers: validation, then the CPU reference or the
// CUDA implementation.
#include "ops/group_norm.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace h3::ops {

using namespace detail;

namespace {

// The checks group_norm and group_norm_stats share: x f32 [B, C, T, H, W], groups dividing C, eps, the
// optional affine [C].
Status check_norm_inputs(const char* op, const Context& ctx, const GroupNormParams& p, const Tensor& x,
                         const Tensor& weight, const Tensor& bias) {
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_rank(op, "x", x, 5));
    if (x.dtype() != DType::kF32)
        return invalid_argument(std::string(op) + ": x is " + desc(x) + ", expected f32");
    const int64_t c = x.dim(1);
    if (p.groups < 1 || c % p.groups)
        return invalid_argument(std::string(op) + ": " + std::to_string(p.groups) +
                                " groups must divide the " + std::to_string(c) + " channels of x " + desc(x));
    if (!(p.eps >= 0.0f) || !std::isfinite(p.eps))
        return invalid_argument(std::string(op) + ": eps = " + std::to_string(p.eps) +
                                " must be finite and >= 0");
    for (const auto& [name, t] :
         {std::pair<const char*, const Tensor*>{"weight", &weight}, {"bias", &bias}}) {
        if (!t->defined()) continue;
        H3_TRY(check_float_contig(op, name, ctx, *t));
        if (t->dtype() != DType::kF32)
            return invalid_argument(std::string(op) + ": " + name + " is " + desc(*t) + ", expected f32");
        H3_TRY(check_shape(op, name, *t, Shape{c}, "x's channels"));
    }
    return ok_status();
}

// scale or shift: f32 [B, T, C] for x [B, C, T, H, W].
Status check_affine(const char* op, const char* name, const Context& ctx, const Tensor& x, const Tensor& t) {
    H3_TRY(check_float_contig(op, name, ctx, t));
    if (t.dtype() != DType::kF32)
        return invalid_argument(std::string(op) + ": " + name + " is " + desc(t) + ", expected f32");
    return check_shape(op, name, t, Shape{x.dim(0), x.dim(2), x.dim(1)}, "[B, T, C] of x");
}

// x [B, C, T, H, W] and an f32 output y of x's shape, both dense on ctx's device, y writable.
Status check_x_and_y(const char* op, const Context& ctx, const Tensor& x, const Tensor& y) {
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_rank(op, "x", x, 5));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    if (y.dtype() != DType::kF32)
        return invalid_argument(std::string(op) + ": y is " + desc(y) + ", expected f32");
    return ok_status();
}

} // namespace

Status group_norm(const Context& ctx, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y) {
    const char* op = "group_norm";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_x_and_y(op, ctx, x, y));
    H3_TRY(check_norm_inputs(op, ctx, p, x, weight, bias));
    H3_OPS_DISPATCH(group_norm, ctx, p, x, weight, bias, y);
}

Status group_norm_stats(const Context& ctx, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, Tensor& scale, Tensor& shift) {
    const char* op = "group_norm_stats";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_norm_inputs(op, ctx, p, x, weight, bias));
    H3_TRY(check_affine(op, "scale", ctx, x, scale));
    H3_TRY(check_affine(op, "shift", ctx, x, shift));
    H3_TRY(check_writable(op, "scale", scale));
    H3_TRY(check_writable(op, "shift", shift));
    if (scale.data() == shift.data())
        return invalid_argument("group_norm_stats: scale and shift must not alias");
    H3_OPS_DISPATCH(group_norm_stats, ctx, p, x, weight, bias, scale, shift);
}

Status group_norm_apply(const Context& ctx, const GroupNormApplyParams& p, const Tensor& x,
                        const Tensor& scale, const Tensor& shift, Tensor& y) {
    const char* op = "group_norm_apply";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_x_and_y(op, ctx, x, y));
    if (x.dtype() != DType::kF32)
        return invalid_argument("group_norm_apply: x and y must be f32, got " + desc(x) + " and " + desc(y));
    H3_TRY(check_affine(op, "scale", ctx, x, scale));
    H3_TRY(check_affine(op, "shift", ctx, x, shift));
    H3_OPS_DISPATCH(group_norm_apply, ctx, p, x, scale, shift, y);
}

} // namespace h3::ops
