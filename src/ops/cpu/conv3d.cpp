// CPU reference for conv3d: per output frame and valid temporal tap, a spatial im2col of the input frame
// (padding resolved per index) and one OpenBLAS sgemm accumulating into the output frame, fp32. An input
// transform (Conv3dParams::input) is materialized first with group_norm_apply: the fused op's reference is
// the unfused composition. Each sgemm covers at most about kCancelCheckMacs multiply-adds (pixel columns per
// call), and a cancelled job (ops/cancel.h) stops between them.
#include "ops/cancel.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

namespace h3::ops::cpu_impl {

namespace {

// Source index of padded position i in [−pad, n + pad), or −1 for a zero.
inline int64_t pad_index(int64_t i, int64_t n, PadMode m) {
    if (i >= 0 && i < n) return i;
    switch (m) {
    case PadMode::kZeros:
        return -1;
    case PadMode::kReflect:
        return i < 0 ? -i : 2 * (n - 1) - i;
    case PadMode::kReplicate:
        return i < 0 ? 0 : n - 1;
    }
    return -1;
}

} // namespace

Status conv3d(const Context& ctx, const Conv3dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y) {
    if (p.input) {
        Tensor u = Tensor::host(x.shape(), DType::kF32);
        H3_TRY(
            cpu_impl::group_norm_apply(ctx, {.silu = p.input->silu}, x, p.input->scale, p.input->shift, u));
        Conv3dParams plain = p;
        plain.input = nullptr;
        return cpu_impl::conv3d(ctx, plain, u, w, bias, y);
    }
    const int64_t nb = x.dim(0), cin = x.dim(1), t = x.dim(2), h = x.dim(3), wd = x.dim(4);
    const int64_t cout = w.dim(0), kt = w.dim(2), kh = w.dim(3), kw = w.dim(4);
    const int64_t to = y.dim(2), ho = y.dim(3), wo = y.dim(4), np = ho * wo, khw = kh * kw, kk = cin * khw;
    const float* xp = x.data_as<const float>();
    const float* wp = w.data_as<const float>();
    const float* bp = bias.defined() ? bias.data_as<const float>() : nullptr;
    float* yp = y.data_as<float>();
    // Weights per temporal tap: wr[tap] = [Cout, Cin·KH·KW].
    std::vector<float> wr(static_cast<size_t>(kt * cout * kk));
#pragma omp parallel for schedule(static)
    for (int64_t co = 0; co < cout; ++co)
        for (int64_t ci = 0; ci < cin; ++ci)
            for (int64_t a = 0; a < kt; ++a)
                for (int64_t r = 0; r < khw; ++r)
                    wr[static_cast<size_t>((a * cout + co) * kk + ci * khw + r)] =
                        wp[((co * cin + ci) * kt + a) * khw + r];
    // Pixel columns per sgemm: bounds the im2col buffer to ~16 M floats and the call to kCancelCheckMacs.
    const int64_t chunk =
        std::max<int64_t>(1, std::min({np, (int64_t{1} << 24) / std::max<int64_t>(kk, 1),
                                       kCancelCheckMacs / std::max<int64_t>(kk * cout, 1)}));
    const std::atomic<bool>* cancel = cancel_flag();
    std::vector<float> col(static_cast<size_t>(kk * chunk));
    for (int64_t b = 0; b < nb; ++b)
        for (int64_t f = 0; f < to; ++f) {
            float* yf = yp + (b * cout * to + f) * np; // row co at yf + co·To·Np
            const int64_t ldc = to * np;
#pragma omp parallel for schedule(static)
            for (int64_t co = 0; co < cout; ++co)
                std::fill(yf + co * ldc, yf + co * ldc + np, bp ? bp[co] : 0.0f);
            for (int64_t a = 0; a < kt; ++a) {
                const int64_t ti = f * p.stride_t - p.pad_front + a;
                if (ti < 0 || ti >= t) continue; // a zero frame in front
                for (int64_t p0 = 0; p0 < np; p0 += chunk) {
                    if (cancel_requested(cancel)) return cancelled_in("conv3d");
                    const int64_t nc = std::min(chunk, np - p0);
#pragma omp parallel for schedule(static)
                    for (int64_t row = 0; row < kk; ++row) {
                        const int64_t ci = row / khw, dy = (row % khw) / kw, dx = row % kw;
                        const float* xf = xp + ((b * cin + ci) * t + ti) * h * wd;
                        float* c = col.data() + row * nc;
                        for (int64_t j = 0; j < nc; ++j) {
                            const int64_t pix = p0 + j, oy = pix / wo, ox = pix % wo;
                            const int64_t iy = pad_index(oy * p.stride_h - p.pad_top + dy, h, p.spatial_mode);
                            const int64_t ix =
                                pad_index(ox * p.stride_w - p.pad_left + dx, wd, p.spatial_mode);
                            c[j] = (iy < 0 || ix < 0) ? 0.0f : xf[iy * wd + ix];
                        }
                    }
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(cout),
                                static_cast<int>(nc), static_cast<int>(kk), 1.0f, wr.data() + a * cout * kk,
                                static_cast<int>(kk), col.data(), static_cast<int>(nc), 1.0f, yf + p0,
                                static_cast<int>(ldc));
                }
            }
        }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
