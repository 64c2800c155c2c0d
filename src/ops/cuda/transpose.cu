// CUDA transpose: 32×32 tiles through shared memory (one padding column against bank conflicts), so both the
// reads of x and the writes of y are coalesced; elements are copied as raw bits of their size.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kTile = 32, kRows = 8;

// grid (tiles along n, tiles along m, batch); block (32, 8): each thread moves 4 elements.
template <typename T>
__global__ void transpose_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int64_t n) {
    __shared__ T tile[kTile][kTile + 1];
    const int64_t b = blockIdx.z;
    const T* xb = x + b * m * n;
    T* yb = y + b * m * n;
    const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTile,
                  j0 = static_cast<int64_t>(blockIdx.x) * kTile;
    for (int r = threadIdx.y; r < kTile; r += kRows) {
        const int64_t i = i0 + r, j = j0 + threadIdx.x;
        if (i < m && j < n) tile[r][threadIdx.x] = xb[i * n + j];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kRows) {
        const int64_t j = j0 + r, i = i0 + threadIdx.x;
        if (i < m && j < n) yb[j * m + i] = tile[threadIdx.x][r];
    }
}

template <typename T> Status launch(const Context& ctx, const Tensor& x, Tensor& y, int64_t batch) {
    const int64_t m = x.dim(-2), n = x.dim(-1);
    const int64_t gx = (n + kTile - 1) / kTile, gy = (m + kTile - 1) / kTile;
    if (gy > 65535 || batch > 65535)
        return unimplemented("transpose (CUDA): more than 65535·32 rows or batches");
    transpose_kernel<T>
        <<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(batch)),
           dim3(kTile, kRows), 0, stream_of(ctx)>>>(x.data_as<const T>(), y.data_as<T>(), m, n);
    return check_launch("transpose");
}

} // namespace

Status transpose(const Context& ctx, const Tensor& x, Tensor& y) {
    const int64_t batch = x.rank() == 3 ? x.dim(0) : 1;
    if (x.numel() == 0) return ok_status();
    switch (dtype_size(x.dtype())) {
    case 1:
        return launch<uint8_t>(ctx, x, y, batch);
    case 2:
        return launch<uint16_t>(ctx, x, y, batch);
    case 4:
        return launch<uint32_t>(ctx, x, y, batch);
    case 8:
        return launch<uint64_t>(ctx, x, y, batch);
    default:
        return unimplemented(std::string("transpose (CUDA): elements of ") + dtype_name(x.dtype()));
    }
}

} // namespace h3::ops::cuda_impl
