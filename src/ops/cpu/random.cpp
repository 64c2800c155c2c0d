// CPU half of fill_uniform: the shared counter-based formula, one rounding at the store.
#include "ops/random.h"
#include "ops/cpu/cpu_ops.h"

namespace h3::ops::cpu_impl {

Status fill_uniform(const Context&, const FillUniformParams& p, Tensor& x) {
    const int64_t n = x.numel();
    void* base = x.data();
    const DType t = x.dtype();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
        store_from_f64(base, t, static_cast<size_t>(i),
                       uniform_value(p.seed, static_cast<uint64_t>(i), p.bound, p.offset));
    return ok_status();
}

} // namespace h3::ops::cpu_impl
