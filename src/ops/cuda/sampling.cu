// CUDA euler_update: the step of ops/sampling.h with explicit round-to-nearest products and sums (no FMA
// contraction), so the result is bit-identical to the CPU reference. 16-byte accesses when aligned.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

__device__ __forceinline__ float euler_step_rn(float x, float v, float sigma_t, float ratio,
                                               float one_minus) {
    const float denoised = __fadd_rn(x, __fmul_rn(sigma_t, v));
    return __fadd_rn(__fmul_rn(ratio, x), __fmul_rn(one_minus, denoised));
}

template <int N>
__global__ void euler_kernel(float* __restrict__ x, const float* __restrict__ v, int64_t chunks,
                             float sigma_t, float ratio, float one_minus) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float a[N], b[N];
        load_vec<N>(x + i * N, a);
        load_vec<N>(v + i * N, b);
#pragma unroll
        for (int j = 0; j < N; ++j) a[j] = euler_step_rn(a[j], b[j], sigma_t, ratio, one_minus);
        store_vec<N>(x + i * N, a);
    }
}

} // namespace

Status euler_update(const Context& ctx, const EulerParams& p, Tensor& x, const Tensor& v) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    const float sigma_t = 1.0f - p.timestep, ratio = p.sigma_next / p.sigma, one_minus = 1.0f - ratio;
    float* xp = x.data_as<float>();
    const float* vp = v.data_as<const float>();
    constexpr int kBlock = 256;
    if (n % 8 == 0 && pointer_alignment(xp) >= 16 && pointer_alignment(vp) >= 16)
        euler_kernel<8><<<grid_for(n / 8, kBlock), kBlock, 0, stream_of(ctx)>>>(xp, vp, n / 8, sigma_t, ratio,
                                                                                one_minus);
    else
        euler_kernel<1>
            <<<grid_for(n, kBlock), kBlock, 0, stream_of(ctx)>>>(xp, vp, n, sigma_t, ratio, one_minus);
    return check_launch("euler_update");
}

} // namespace h3::ops::cuda_impl
