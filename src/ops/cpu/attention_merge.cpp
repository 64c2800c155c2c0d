// CPU attention_merge reference (ops/attention_merge.h): weights and the mix in double, one rounding at the
// store. Rows are independent, so in-place use (o = o_a, lse = lse_a) reads each position before writing it.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <cmath>
#include <limits>
#include <vector>

namespace h3::ops::cpu_impl {

Status attention_merge(const Context&, const Tensor& o_a, const Tensor& lse_a, const Tensor& o_b,
                       const Tensor& lse_b, Tensor& o, Tensor& lse) {
    const int64_t rows = o_a.dim(0) * o_a.dim(1), d = o_a.dim(2);
    const float* la = lse_a.data_as<const float>();
    const float* lb = lse_b.data_as<const float>();
    float* lo = lse.defined() ? lse.data_as<float>() : nullptr;
    constexpr double kNegInf = -std::numeric_limits<double>::infinity();
#pragma omp parallel
    {
        std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d)), out(static_cast<size_t>(d));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const double xa = la[r], xb = lb[r], m = std::max(xa, xb);
            double merged = kNegInf;
            if (m == kNegInf) {
                std::fill(out.begin(), out.end(), 0.0f);
            } else {
                // A side with no key (lse −inf) gets weight 0 and its o is never read (it may be NaN).
                const double wa = xa == kNegInf ? 0.0 : std::exp(xa - m);
                const double wb = xb == kNegInf ? 0.0 : std::exp(xb - m);
                const double inv = 1.0 / (wa + wb);
                if (wa > 0) load_f32(elem_ptr(o_a, r * d), o_a.dtype(), a.data(), d);
                if (wb > 0) load_f32(elem_ptr(o_b, r * d), o_b.dtype(), b.data(), d);
                for (int64_t c = 0; c < d; ++c) {
                    const double va = wa > 0 ? wa * a[c] : 0.0, vb = wb > 0 ? wb * b[c] : 0.0;
                    out[c] = static_cast<float>((va + vb) * inv);
                }
                merged = m + std::log(wa + wb);
            }
            store_f32(out.data(), elem_ptr_mut(o, r * d), o.dtype(), d);
            if (lo) lo[r] = static_cast<float>(merged);
        }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
