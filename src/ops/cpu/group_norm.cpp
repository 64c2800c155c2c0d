// CPU references for group_norm, group_norm_stats and group_norm_apply: per (b, t, group) a two-pass mean /
// biased variance in double, then y = x·a + s with a = rstd·weight, s = bias − mean·a in fp32 (the folding
// PyTorch's CPU kernel uses), then SiLU when asked. All three share the helpers below, so group_norm equals
// group_norm_stats followed by group_norm_apply bit for bit.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <cmath>

namespace h3::ops::cpu_impl {

namespace {

// The fp32 affine of one channel (scale a, shift s) from its group's statistics.
struct ChannelAffine {
    float a, s;
};

// Mean and 1/sqrt(var + eps) of the `cpg` channel planes of `hw` values starting at `first`, `pitch` floats
// apart: two passes in double.
void group_moments(const float* first, int64_t pitch, int64_t cpg, int64_t hw, float eps, double& mean,
                   double& rstd) {
    double sum = 0.0;
    for (int64_t k = 0; k < cpg; ++k)
        for (int64_t i = 0; i < hw; ++i) sum += first[k * pitch + i];
    const double n = static_cast<double>(cpg * hw);
    mean = sum / n;
    double sq = 0.0;
    for (int64_t k = 0; k < cpg; ++k)
        for (int64_t i = 0; i < hw; ++i) {
            const double e = first[k * pitch + i] - mean;
            sq += e * e;
        }
    rstd = 1.0 / std::sqrt(sq / n + static_cast<double>(eps));
}

ChannelAffine channel_affine(double mean, double rstd, const float* wp, const float* bp, int64_t ch) {
    const double gain = wp ? wp[ch] : 1.0, shift = bp ? bp[ch] : 0.0;
    return {static_cast<float>(rstd * gain), static_cast<float>(shift - mean * rstd * gain)};
}

// y[i] = silu?(x[i]·a + s) over one plane of `hw` values.
void apply_plane(const float* xr, float* yr, int64_t hw, ChannelAffine f, bool silu) {
    for (int64_t i = 0; i < hw; ++i) {
        const float v = xr[i] * f.a + f.s;
        yr[i] = silu ? v / (1.0f + std::exp(-v)) : v;
    }
}

} // namespace

Status group_norm(const Context&, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y) {
    const int64_t nb = x.dim(0), c = x.dim(1), t = x.dim(2), hw = x.dim(3) * x.dim(4);
    const int64_t cpg = c / p.groups;
    const float* xp = x.data_as<const float>();
    const float* wp = weight.defined() ? weight.data_as<const float>() : nullptr;
    const float* bp = bias.defined() ? bias.data_as<const float>() : nullptr;
    float* yp = y.data_as<float>();
#pragma omp parallel for schedule(static)
    for (int64_t job = 0; job < nb * t * p.groups; ++job) {
        const int64_t g = job % p.groups, f = (job / p.groups) % t, b = job / (p.groups * t);
        auto plane = [&](int64_t ch) { return ((b * c + ch) * t + f) * hw; };
        double mean = 0.0, rstd = 0.0;
        group_moments(xp + plane(g * cpg), t * hw, cpg, hw, p.eps, mean, rstd);
        for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch)
            apply_plane(xp + plane(ch), yp + plane(ch), hw, channel_affine(mean, rstd, wp, bp, ch), p.silu);
    }
    return ok_status();
}

Status group_norm_stats(const Context&, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, Tensor& scale, Tensor& shift) {
    const int64_t nb = x.dim(0), c = x.dim(1), t = x.dim(2), hw = x.dim(3) * x.dim(4);
    const int64_t cpg = c / p.groups;
    const float* xp = x.data_as<const float>();
    const float* wp = weight.defined() ? weight.data_as<const float>() : nullptr;
    const float* bp = bias.defined() ? bias.data_as<const float>() : nullptr;
    float* sc = scale.data_as<float>();
    float* sh = shift.data_as<float>();
#pragma omp parallel for schedule(static)
    for (int64_t job = 0; job < nb * t * p.groups; ++job) {
        const int64_t g = job % p.groups, f = (job / p.groups) % t, b = job / (p.groups * t);
        double mean = 0.0, rstd = 0.0;
        group_moments(xp + ((b * c + g * cpg) * t + f) * hw, t * hw, cpg, hw, p.eps, mean, rstd);
        for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
            const ChannelAffine a = channel_affine(mean, rstd, wp, bp, ch);
            sc[(b * t + f) * c + ch] = a.a;
            sh[(b * t + f) * c + ch] = a.s;
        }
    }
    return ok_status();
}

Status group_norm_apply(const Context&, const GroupNormApplyParams& p, const Tensor& x, const Tensor& scale,
                        const Tensor& shift, Tensor& y) {
    const int64_t nb = x.dim(0), c = x.dim(1), t = x.dim(2), hw = x.dim(3) * x.dim(4);
    const float* xp = x.data_as<const float>();
    const float* sc = scale.data_as<const float>();
    const float* sh = shift.data_as<const float>();
    float* yp = y.data_as<float>();
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < nb * c * t; ++pl) { // plane (b, ch, f)
        const int64_t f = pl % t, ch = (pl / t) % c, b = pl / (t * c);
        const int64_t k = (b * t + f) * c + ch;
        apply_plane(xp + pl * hw, yp + pl * hw, hw, {sc[k], sh[k]}, p.silu);
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
