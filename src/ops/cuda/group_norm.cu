// CUDA group_norm: one block per (b, t, group); two passes over the group's channel planes for the mean and
// the centred variance (double accumulators, like the CPU reference), a third one to normalize, apply the
// affine and (optionally) SiLU.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kGnThreads = 512;

__device__ __forceinline__ double block_sum_double(double v) {
    __shared__ double partial[32];
    __shared__ double total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        double s = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) total = s;
    }
    __syncthreads();
    const double r = total;
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(kGnThreads)
    group_norm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                      const float* __restrict__ bias, float* y, int c, int t, int64_t hw, int groups,
                      float eps, bool silu) {
    const int64_t job = blockIdx.x;
    const int g = static_cast<int>(job % groups), f = static_cast<int>((job / groups) % t);
    const int64_t b = job / (static_cast<int64_t>(groups) * t);
    const int cpg = c / groups;
    auto plane = [&](int ch) { return ((b * c + ch) * t + f) * hw; };
    double s = 0.0;
    for (int ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
        const float* xr = x + plane(ch);
        for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) s += xr[i];
    }
    const double n = static_cast<double>(cpg) * static_cast<double>(hw);
    const double mean = block_sum_double(s) / n;
    double q = 0.0;
    for (int ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
        const float* xr = x + plane(ch);
        for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) {
            const double e = xr[i] - mean;
            q += e * e;
        }
    }
    const double rstd = rsqrt(block_sum_double(q) / n + static_cast<double>(eps));
    for (int ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
        const double gain = weight ? weight[ch] : 1.0, shift = bias ? bias[ch] : 0.0;
        const float a = static_cast<float>(rstd * gain);
        const float sh = static_cast<float>(shift - mean * rstd * gain);
        const float* xr = x + plane(ch);
        float* yr = y + plane(ch);
        for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) {
            const float v = __fadd_rn(__fmul_rn(xr[i], a), sh);
            yr[i] = silu ? v / (1.0f + expf(-v)) : v;
        }
    }
}

} // namespace

Status group_norm(const Context& ctx, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y) {
    const int64_t jobs = x.dim(0) * x.dim(2) * p.groups, hw = x.dim(3) * x.dim(4);
    if (x.numel() == 0) return ok_status();
    if (jobs > 2147483647LL) return unimplemented("group_norm (CUDA): more than 2^31 (b, t, group) rows");
    group_norm_kernel<<<static_cast<unsigned>(jobs), kGnThreads, 0, stream_of(ctx)>>>(
        x.data_as<const float>(), weight.defined() ? weight.data_as<const float>() : nullptr,
        bias.defined() ? bias.data_as<const float>() : nullptr, y.data_as<float>(),
        static_cast<int>(x.dim(1)), static_cast<int>(x.dim(2)), hw, p.groups, p.eps, p.silu);
    return check_launch("group_norm");
}

} // namespace h3::ops::cuda_impl
