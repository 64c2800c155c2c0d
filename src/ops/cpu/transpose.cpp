// CPU transpose reference: 32×32 blocks so both the reads and the writes stay within a few cache lines;
// elements are copied as raw bits of their size.
#include "ops/cpu/cpu_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace h3::ops::cpu_impl {

namespace {

template <typename T> void transpose_bits(const T* x, T* y, int64_t batch, int64_t m, int64_t n) {
    constexpr int64_t kBlock = 32;
    const int64_t bm = (m + kBlock - 1) / kBlock, bn = (n + kBlock - 1) / kBlock;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t blk = 0; blk < bm * bn; ++blk) {
            const int64_t i0 = (blk / bn) * kBlock, j0 = (blk % bn) * kBlock;
            const T* xb = x + b * m * n;
            T* yb = y + b * m * n;
            for (int64_t i = i0; i < std::min(m, i0 + kBlock); ++i)
                for (int64_t j = j0; j < std::min(n, j0 + kBlock); ++j) yb[j * m + i] = xb[i * n + j];
        }
}

} // namespace

Status transpose(const Context&, const Tensor& x, Tensor& y) {
    const int64_t batch = x.rank() == 3 ? x.dim(0) : 1, m = x.dim(-2), n = x.dim(-1);
    if (x.numel() == 0) return ok_status();
    switch (dtype_size(x.dtype())) {
    case 1:
        transpose_bits(x.data_as<const uint8_t>(), y.data_as<uint8_t>(), batch, m, n);
        break;
    case 2:
        transpose_bits(x.data_as<const uint16_t>(), y.data_as<uint16_t>(), batch, m, n);
        break;
    case 4:
        transpose_bits(x.data_as<const uint32_t>(), y.data_as<uint32_t>(), batch, m, n);
        break;
    case 8:
        transpose_bits(x.data_as<const uint64_t>(), y.data_as<uint64_t>(), batch, m, n);
        break;
    default:
        return unimplemented(std::string("transpose: elements of ") + dtype_name(x.dtype()));
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
