// CPU reference for group_norm: per (b, t, group) a two-pass mean / biased variance in double, then
// y = x·a + s with a = rstd·weight, s = bias − mean·a in fp32 (the folding PyTorch's CPU kernel uses), then
// SiLU when asked.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <cmath>

namespace h3::ops::cpu_impl {

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
        double sum = 0.0;
        for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch)
            for (int64_t i = 0; i < hw; ++i) sum += xp[plane(ch) + i];
        const double n = static_cast<double>(cpg * hw), mean = sum / n;
        double sq = 0.0;
        for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch)
            for (int64_t i = 0; i < hw; ++i) {
                const double e = xp[plane(ch) + i] - mean;
                sq += e * e;
            }
        const double rstd = 1.0 / std::sqrt(sq / n + static_cast<double>(p.eps));
        for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
            const double gain = wp ? wp[ch] : 1.0, shift = bp ? bp[ch] : 0.0;
            const float a = static_cast<float>(rstd * gain);
            const float s = static_cast<float>(shift - mean * rstd * gain);
            const float* xr = xp + plane(ch);
            float* yr = yp + plane(ch);
            for (int64_t i = 0; i < hw; ++i) {
                const float v = xr[i] * a + s;
                yr[i] = p.silu ? v / (1.0f + std::exp(-v)) : v;
            }
        }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
