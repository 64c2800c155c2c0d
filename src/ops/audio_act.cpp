// snake_beta / snake / alias_free_snake_beta / scale / clamp dispatchers.
#include "ops/audio_act.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

namespace {

Status check_snake_args(const char* op, const Context& ctx, const Tensor& x, const Tensor& alpha,
                        const Tensor& y) {
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "x", ctx, x));
    H3_TRY(check_rank(op, "x", x, 3));
    H3_TRY(check_f32_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    H3_TRY(check_f32_contig(op, "alpha", ctx, alpha));
    H3_TRY(check_shape(op, "alpha", alpha, Shape{x.dim(1)}, "x's channel count"));
    return ok_status();
}

Status check_signal_args(const char* op, const Context& ctx, const Tensor& x, const Tensor& alpha,
                         const Tensor& beta, const Tensor& y) {
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "x", ctx, x));
    H3_TRY(check_rank(op, "x", x, 3));
    H3_TRY(check_f32_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    H3_TRY(check_f32_contig(op, "alpha", ctx, alpha));
    H3_TRY(check_shape(op, "alpha", alpha, Shape{x.dim(1)}, "x's channel count"));
    H3_TRY(check_f32_contig(op, "beta", ctx, beta));
    H3_TRY(check_shape(op, "beta", beta, Shape{x.dim(1)}, "x's channel count"));
    return ok_status();
}

} // namespace

Status snake_beta(const Context& ctx, const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y) {
    H3_TRY(check_signal_args("snake_beta", ctx, x, alpha, beta, y));
    H3_OPS_DISPATCH(snake_beta, ctx, x, alpha, beta, y);
}

Status snake(const Context& ctx, const Tensor& x, const Tensor& alpha, Tensor& y) {
    H3_TRY(check_snake_args("snake", ctx, x, alpha, y));
    H3_OPS_DISPATCH(snake, ctx, x, alpha, y);
}

Status alias_free_snake_beta(const Context& ctx, const AliasFreeParams& p, const Tensor& x,
                             const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                             const Tensor& down_filter, Tensor& y) {
    const char* op = "alias_free_snake_beta";
    H3_TRY(check_signal_args(op, ctx, x, alpha, beta, y));
    H3_TRY(check_f32_contig(op, "up_filter", ctx, up_filter));
    H3_TRY(check_rank(op, "up_filter", up_filter, 1));
    H3_TRY(check_f32_contig(op, "down_filter", ctx, down_filter));
    H3_TRY(check_shape(op, "down_filter", down_filter, up_filter.shape(), "up_filter's shape"));
    const int64_t k = up_filter.dim(0);
    if (p.ratio < 1 || k % 2 || k < p.ratio)
        return invalid_argument("alias_free_snake_beta: filter length " + std::to_string(k) +
                                " must be even and >= ratio " + std::to_string(p.ratio));
    if (x.dim(2) < 1) return invalid_argument("alias_free_snake_beta: x has no samples: " + desc(x));
    if (x.data() == y.data()) return invalid_argument("alias_free_snake_beta: x and y must not alias");
    H3_OPS_DISPATCH(alias_free_snake_beta, ctx, p, x, alpha, beta, up_filter, down_filter, y);
}

Status scale(const Context& ctx, float alpha, const Tensor& x, Tensor& y) {
    const char* op = "scale";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "x", ctx, x));
    H3_TRY(check_f32_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    H3_OPS_DISPATCH(scale, ctx, alpha, x, y);
}

Status clamp(const Context& ctx, float lo, float hi, const Tensor& x, Tensor& y) {
    const char* op = "clamp";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "x", ctx, x));
    H3_TRY(check_f32_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    if (!(lo <= hi)) return invalid_argument("clamp: lo must be <= hi");
    H3_OPS_DISPATCH(clamp, ctx, lo, hi, x, y);
}

} // namespace h3::ops
