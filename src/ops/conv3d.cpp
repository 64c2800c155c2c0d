// conv3d dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/conv3d.h"

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

Shape conv3d_out_shape(const Shape& x, const Shape& w, const Conv3dParams& p) {
    if (x.rank() != 5 || w.rank() != 5 || p.stride_t < 1 || p.stride_h < 1 || p.stride_w < 1) return Shape{};
    const int64_t t = x[2] + p.pad_front - w[2];
    const int64_t h = x[3] + p.pad_top + p.pad_bottom - w[3];
    const int64_t wd = x[4] + p.pad_left + p.pad_right - w[4];
    if (t < 0 || h < 0 || wd < 0) return Shape{};
    return Shape{x[0], w[0], t / p.stride_t + 1, h / p.stride_h + 1, wd / p.stride_w + 1};
}

Status conv3d(const Context& ctx, const Conv3dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y) {
    const char* op = "conv3d";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "x", ctx, x, 5));
    H3_TRY(check_f32_contig(op, "w", ctx, w, 5));
    H3_TRY(check_f32_contig(op, "y", ctx, y, 5));
    H3_TRY(check_writable(op, "y", y));
    if (p.stride_t < 1 || p.stride_h < 1 || p.stride_w < 1)
        return invalid_argument("conv3d: strides " + num(p.stride_t) + "×" + num(p.stride_h) + "×" +
                                num(p.stride_w) + " must be >= 1");
    if (p.pad_front < 0 || p.pad_top < 0 || p.pad_bottom < 0 || p.pad_left < 0 || p.pad_right < 0)
        return invalid_argument("conv3d: paddings must be >= 0");
    if (w.dim(1) != x.dim(1))
        return invalid_argument("conv3d: w is " + desc(w) + " but x has Cin = " + num(x.dim(1)));
    if (w.dim(2) < 1 || w.dim(3) < 1 || w.dim(4) < 1)
        return invalid_argument("conv3d: kernel extents must be >= 1, w is " + desc(w));
    if (x.dim(2) < 1 || x.dim(3) < 1 || x.dim(4) < 1)
        return invalid_argument("conv3d: x has an empty frame or no frames: " + desc(x));
    if (p.spatial_mode == PadMode::kReflect) {
        const int64_t h = x.dim(3), wd = x.dim(4);
        if (p.pad_top >= h || p.pad_bottom >= h || p.pad_left >= wd || p.pad_right >= wd)
            return invalid_argument("conv3d: reflect padding must be smaller than the frame (" + num(h) +
                                    "×" + num(wd) + ")");
    }
    const Shape out = conv3d_out_shape(x.shape(), w.shape(), p);
    if (out.rank() != 5)
        return invalid_argument("conv3d: the padded input " + desc(x) + " is smaller than the kernel " +
                                desc(w));
    H3_TRY(check_shape(op, "y", y, out, "[B, Cout, To, Ho, Wo]"));
    if (bias.defined()) {
        H3_TRY(check_float_contig(op, "bias", ctx, bias));
        H3_TRY(check_rank(op, "bias", bias, 1));
        if (bias.dtype() != DType::kF32)
            return invalid_argument("conv3d: bias is " + desc(bias) + ", expected f32");
        H3_TRY(check_shape(op, "bias", bias, Shape{w.dim(0)}, "w's Cout"));
    }
    if (x.data() == y.data()) return invalid_argument("conv3d: x and y must not alias");
    if (p.input) {
        if (!p.input->scale.defined() || !p.input->shift.defined())
            return invalid_argument("conv3d: the input transform needs both scale and shift");
        const Shape bt{x.dim(0), x.dim(2), x.dim(1)};
        for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"input scale", &p.input->scale},
                                      {"input shift", &p.input->shift}}) {
            H3_TRY(check_float_contig(op, name, ctx, *t));
            if (t->dtype() != DType::kF32)
                return invalid_argument(std::string("conv3d: ") + name + " is " + desc(*t) +
                                        ", expected f32");
            H3_TRY(check_shape(op, name, *t, bt, "[B, T, Cin] of x"));
            if (t->data() == y.data())
                return invalid_argument(std::string("conv3d: ") + name + " and y alias");
        }
    }
    if (p.residual) {
        H3_TRY(check_f32_contig(op, "residual", ctx, *p.residual, 5));
        H3_TRY(check_shape(op, "residual", *p.residual, out, "y's shape"));
        if (p.residual->data() == y.data()) return invalid_argument("conv3d: residual and y must not alias");
    }
    // CUDA adds the residual itself (in the GEMM's epilogue where its kernel can); the CPU adds it after.
    if (!p.residual || ctx.is_cuda()) H3_OPS_DISPATCH(conv3d, ctx, p, x, w, bias, y);
    Conv3dParams conv = p;
    conv.residual = nullptr;
    H3_TRY(cpu_impl::conv3d(ctx, conv, x, w, bias, y));
    return cpu_impl::add(ctx, y, *p.residual, y);
}

} // namespace h3::ops
