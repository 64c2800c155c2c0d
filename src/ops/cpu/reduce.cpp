// CPU l1_sums: fixed 4096-element chunks summed in double, the chunk sums added in chunk order (the result
// does not depend on the thread count).
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace h3::ops::cpu_impl {

Status l1_sums(const Context&, const Tensor& cur, const Tensor& ref, L1Sums& out) {
    constexpr int64_t kChunk = 4096;
    const int64_t n = cur.numel();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> diff(static_cast<size_t>(chunks)), mag(static_cast<size_t>(chunks));
#pragma omp parallel
    {
        std::vector<float> a(static_cast<size_t>(kChunk)), b(static_cast<size_t>(kChunk));
#pragma omp for schedule(static)
        for (int64_t c = 0; c < chunks; ++c) {
            const int64_t i0 = c * kChunk, len = std::min(kChunk, n - i0);
            load_f32(elem_ptr(cur, i0), cur.dtype(), a.data(), len);
            load_f32(elem_ptr(ref, i0), ref.dtype(), b.data(), len);
            double d = 0, m = 0;
            for (int64_t i = 0; i < len; ++i) {
                d += std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
                m += std::fabs(static_cast<double>(b[i]));
            }
            diff[static_cast<size_t>(c)] = d;
            mag[static_cast<size_t>(c)] = m;
        }
    }
    out = {};
    for (int64_t c = 0; c < chunks; ++c) {
        out.diff += diff[static_cast<size_t>(c)];
        out.ref += mag[static_cast<size_t>(c)];
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
