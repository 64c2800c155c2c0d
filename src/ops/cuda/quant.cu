// CUDA int8 weight ops: dequantization (16 int8 per thread step, one fp32 product per element, the CPU
// reference's rounding) and the non-finite flag (grid-stride; any thread that sees an inf/NaN writes 1).
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

#include <algorithm>

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t work, const Context& ctx) {
    const int64_t blocks = (work + kThreads - 1) / kThreads;
    const int64_t cap = static_cast<int64_t>(std::max(ctx.cuda->sm_count(), 1)) * 32;
    return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

// Rows of k elements; `vec` (k % 16 == 0 and 16-byte aligned q and w) moves 16 elements per step.
template <typename T, bool kVec>
__global__ void dequantize_kernel(const int8_t* __restrict__ q, const float* __restrict__ scale,
                                  T* __restrict__ w, int64_t n, int64_t k) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    if constexpr (kVec) {
        const int64_t per_row = k / 16, total = n * per_row;
        for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += step) {
            const int64_t r = i / per_row, c = (i % per_row) * 16;
            const float s = scale[r];
            const int4 raw = *reinterpret_cast<const int4*>(q + r * k + c);
            const int8_t* e = reinterpret_cast<const int8_t*>(&raw);
            float lo[8], hi[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                lo[j] = __fmul_rn(static_cast<float>(e[j]), s);
                hi[j] = __fmul_rn(static_cast<float>(e[j + 8]), s);
            }
            store_vec<8>(w + r * k + c, lo);
            store_vec<8>(w + r * k + c + 8, hi);
        }
    } else {
        const int64_t total = n * k;
        for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += step)
            w[i] = from_f32<T>(__fmul_rn(static_cast<float>(q[i]), scale[i / k]));
    }
}

template <typename T>
__global__ void nonfinite_kernel(const T* __restrict__ x, int64_t n, int32_t* __restrict__ flag) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    bool bad = false;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += step)
        bad |= !isfinite(to_f32(x[i]));
    if (bad) *flag = 1;
}

} // namespace

Status dequantize_rows(const Context& ctx, const Tensor& q, const Tensor& scale, Tensor& w) {
    const int64_t n = q.dim(0), k = q.dim(1);
    if (n == 0 || k == 0) return ok_status();
    const bool vec = k % 16 == 0 && pointer_alignment(q.data()) == 16 && pointer_alignment(w.data()) == 16;
    return dispatch_float(w.dtype(), [&](auto tw) -> Status {
        using T = typename decltype(tw)::type;
        const unsigned grid = grid_for(vec ? n * (k / 16) : n * k, ctx);
        if (vec)
            dequantize_kernel<T, true><<<grid, kThreads, 0, stream_of(ctx)>>>(
                q.data_as<const int8_t>(), scale.data_as<const float>(), w.data_as<T>(), n, k);
        else
            dequantize_kernel<T, false><<<grid, kThreads, 0, stream_of(ctx)>>>(
                q.data_as<const int8_t>(), scale.data_as<const float>(), w.data_as<T>(), n, k);
        return check_launch("dequantize_rows");
    });
}

Status mark_nonfinite(const Context& ctx, const Tensor& x, Tensor& flag) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    return dispatch_float(x.dtype(), [&](auto tx) -> Status {
        using T = typename decltype(tx)::type;
        nonfinite_kernel<T><<<grid_for(n, ctx), kThreads, 0, stream_of(ctx)>>>(x.data_as<const T>(), n,
                                                                               flag.data_as<int32_t>());
        return check_launch("mark_nonfinite");
    });
}

} // namespace h3::ops::cuda_impl
