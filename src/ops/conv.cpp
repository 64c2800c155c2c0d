// conv1d / conv_transpose1d dispatchers: validation, then the CPU reference or the CUDA implementation.
#include "ops/conv.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

namespace {

std::string num(int64_t v) {
    return std::to_string(v);
}

} // namespace

int64_t conv1d_out_length(int64_t length, int64_t kernel, const Conv1dParams& p) {
    const int64_t span = static_cast<int64_t>(p.dilation) * (kernel - 1) + 1;
    const int64_t padded = length + 2LL * p.padding;
    if (p.stride <= 0 || padded < span) return 0;
    return (padded - span) / p.stride + 1;
}

int64_t conv_transpose1d_out_length(int64_t length, int64_t kernel, const ConvTranspose1dParams& p) {
    return (length - 1) * p.stride - 2LL * p.padding + kernel;
}

Status conv1d(const Context& ctx, const Conv1dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y) {
    const char* op = "conv1d";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "x", ctx, x, 3));
    H3_TRY(check_f32_contig(op, "w", ctx, w, 3));
    H3_TRY(check_f32_contig(op, "y", ctx, y, 3));
    H3_TRY(check_writable(op, "y", y));
    if (p.stride < 1 || p.dilation < 1 || p.groups < 1 || p.padding < 0)
        return invalid_argument("conv1d: stride " + num(p.stride) + ", dilation " + num(p.dilation) +
                                ", groups " + num(p.groups) + " must be >= 1 and padding " + num(p.padding) +
                                " >= 0");
    const int64_t cin = x.dim(1), cout = w.dim(0), k = w.dim(2);
    if (cin % p.groups || cout % p.groups)
        return invalid_argument("conv1d: groups " + num(p.groups) + " must divide Cin " + num(cin) +
                                " and Cout " + num(cout));
    if (w.dim(1) != cin / p.groups)
        return invalid_argument("conv1d: w is " + desc(w) + " but x has Cin/groups = " + num(cin / p.groups));
    if (k < 1) return invalid_argument("conv1d: kernel size must be >= 1, w is " + desc(w));
    const int64_t lout = conv1d_out_length(x.dim(2), k, p);
    if (lout < 1)
        return invalid_argument("conv1d: input length " + num(x.dim(2)) + " is shorter than the kernel span");
    H3_TRY(check_shape(op, "y", y, Shape{x.dim(0), cout, lout}, "[B, Cout, Lout]"));
    if (bias.defined()) {
        H3_TRY(check_f32_contig(op, "bias", ctx, bias, 1));
        H3_TRY(check_shape(op, "bias", bias, Shape{cout}, "w's Cout"));
    }
    H3_OPS_DISPATCH(conv1d, ctx, p, x, w, bias, y);
}

Status conv_transpose1d(const Context& ctx, const ConvTranspose1dParams& p, const Tensor& x, const Tensor& w,
                        const Tensor& bias, Tensor& y) {
    const char* op = "conv_transpose1d";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "x", ctx, x, 3));
    H3_TRY(check_f32_contig(op, "w", ctx, w, 3));
    H3_TRY(check_f32_contig(op, "y", ctx, y, 3));
    H3_TRY(check_writable(op, "y", y));
    if (p.stride < 1 || p.groups < 1 || p.padding < 0)
        return invalid_argument("conv_transpose1d: stride " + num(p.stride) + ", groups " + num(p.groups) +
                                " must be >= 1 and padding " + num(p.padding) + " >= 0");
    const int64_t cin = x.dim(1), k = w.dim(2);
    if (w.dim(0) != cin)
        return invalid_argument("conv_transpose1d: w is " + desc(w) + " but x has Cin = " + num(cin));
    if (cin % p.groups)
        return invalid_argument("conv_transpose1d: groups " + num(p.groups) + " must divide Cin " + num(cin));
    const int64_t cout = w.dim(1) * p.groups;
    if (k < 1) return invalid_argument("conv_transpose1d: kernel size must be >= 1, w is " + desc(w));
    const int64_t lout = conv_transpose1d_out_length(x.dim(2), k, p);
    if (x.dim(2) < 1 || lout < 1)
        return invalid_argument("conv_transpose1d: output length " + num(lout) + " from input length " +
                                num(x.dim(2)) + " must be >= 1");
    H3_TRY(check_shape(op, "y", y, Shape{x.dim(0), cout, lout}, "[B, Cout, Lout]"));
    if (bias.defined()) {
        H3_TRY(check_f32_contig(op, "bias", ctx, bias, 1));
        H3_TRY(check_shape(op, "bias", bias, Shape{cout}, "Cout = w.dim(1)·groups"));
    }
    H3_OPS_DISPATCH(conv_transpose1d, ctx, p, x, w, bias, y);
}

} // namespace h3::ops
