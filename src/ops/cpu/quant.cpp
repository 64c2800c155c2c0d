// CPU references of the int8 weight ops: the product in fp32, one rounding at the store.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace h3::ops::cpu_impl {

Status dequantize_rows(const Context&, const Tensor& q, const Tensor& scale, Tensor& w) {
    const int64_t n = q.dim(0), k = q.dim(1);
    const int8_t* qp = q.data_as<const int8_t>();
    const float* sp = scale.data_as<const float>();
    const size_t esz = dtype_size(w.dtype());
#pragma omp parallel
    {
        std::vector<float> row(static_cast<size_t>(k));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < n; ++r) {
            const float s = sp[r];
            const int8_t* qr = qp + r * k;
            for (int64_t j = 0; j < k; ++j) row[static_cast<size_t>(j)] = static_cast<float>(qr[j]) * s;
            store_f32(row.data(), static_cast<uint8_t*>(w.data()) + static_cast<size_t>(r * k) * esz,
                      w.dtype(), k);
        }
    }
    return ok_status();
}

Status mark_nonfinite(const Context&, const Tensor& x, Tensor& flag) {
    const int64_t n = x.numel();
    constexpr int64_t kChunk = 4096;
    bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad)
    for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
        float buf[kChunk];
        const int64_t m = std::min(kChunk, n - c0);
        load_f32(static_cast<const uint8_t*>(x.data()) + static_cast<size_t>(c0) * dtype_size(x.dtype()),
                 x.dtype(), buf, m);
        for (int64_t i = 0; i < m; ++i) bad = bad || !std::isfinite(buf[i]);
    }
    if (bad) *flag.data_as<int32_t>() = 1;
    return ok_status();
}

} // namespace h3::ops::cpu_impl
