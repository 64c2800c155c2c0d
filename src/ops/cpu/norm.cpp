// CPU RMSNorm reference: fp32 math, sum of squares in double, one rounding at the store.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <cmath>
#include <vector>

namespace h3::ops::cpu_impl {

Status rms_norm(const Context&, const RmsNormParams& p, const Tensor& x, const Tensor& weight, Tensor& y) {
    const int64_t rows = x.dim(0), d = x.dim(1);
    std::vector<float> w(static_cast<size_t>(d), 1.0f);
    if (weight.defined()) load_f32(weight.data(), weight.dtype(), w.data(), d);
    const bool has_weight = weight.defined();
#pragma omp parallel
    {
        std::vector<float> v(static_cast<size_t>(d));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            load_f32(elem_ptr(x, r * d), x.dtype(), v.data(), d);
            double ss = 0.0;
            for (int64_t c = 0; c < d; ++c) ss += static_cast<double>(v[c]) * v[c];
            const float mean = d > 0 ? static_cast<float>(ss / static_cast<double>(d)) : 0.0f;
            const float inv = 1.0f / std::sqrt(mean + p.eps);
            for (int64_t c = 0; c < d; ++c) v[c] *= inv;
            if (p.round_normed) round_row(v.data(), y.dtype(), d);
            if (has_weight)
                for (int64_t c = 0; c < d; ++c) v[c] *= w[static_cast<size_t>(c)];
            store_f32(v.data(), elem_ptr_mut(y, r * d), y.dtype(), d);
        }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
