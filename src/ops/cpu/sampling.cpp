// CPU reference of euler_update: the scalar step of ops/sampling.h over every element.
#include "ops/cpu/cpu_ops.h"

namespace h3::ops::cpu_impl {

Status euler_update(const Context&, const EulerParams& p, Tensor& x, const Tensor& v) {
    const float sigma_t = 1.0f - p.timestep, ratio = p.sigma_next / p.sigma, one_minus = 1.0f - ratio;
    float* xp = x.data_as<float>();
    const float* vp = v.data_as<const float>();
    const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) xp[i] = euler_step(xp[i], vp[i], sigma_t, ratio, one_minus);
    return ok_status();
}

} // namespace h3::ops::cpu_impl
