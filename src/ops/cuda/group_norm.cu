// CUDA group_norm: one block per (b, t, group); two passes over the group's channel planes for the mean and
// the centred variance (double accumulators, like the CPU reference), a third one to normalize, apply the
// affine and (optionally) SiLU.
// group_norm_stats: one block per (b, t, group), a single pass (double sums of x − pivot and its square, the
// pivot being the group's first value, so a large common offset does not cancel), then the fp32 scale and
// shift of each channel. group_norm_apply: an element-wise pass, 4 values per thread where the planes allow.
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

// The normalized value from its fp32 affine, rounded as the CPU reference rounds it (no contraction).
__device__ __forceinline__ float apply_affine(float x, float a, float sh, bool silu) {
    const float v = __fadd_rn(__fmul_rn(x, a), sh);
    return silu ? v / (1.0f + expf(-v)) : v;
}

// kVec4: hw % 4 == 0 and x 16-byte aligned, so every plane is whole float4s.
template <bool kVec4>
__global__ void __launch_bounds__(kGnThreads)
    group_norm_stats_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                            const float* __restrict__ bias, float* __restrict__ scale,
                            float* __restrict__ shift, int c, int t, int64_t hw, int groups, float eps) {
    const int64_t job = blockIdx.x;
    const int g = static_cast<int>(job % groups), f = static_cast<int>((job / groups) % t);
    const int64_t b = job / (static_cast<int64_t>(groups) * t);
    const int cpg = c / groups;
    auto plane = [&](int ch) { return ((b * c + ch) * t + f) * hw; };
    const double pivot = __ldg(x + plane(g * cpg));
    double s1 = 0.0, s2 = 0.0;
    for (int ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
        const float* xr = x + plane(ch);
        if constexpr (kVec4) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            for (int64_t i = threadIdx.x; i < hw / 4; i += blockDim.x) {
                const float4 v = __ldg(x4 + i);
                const double d0 = v.x - pivot, d1 = v.y - pivot, d2 = v.z - pivot, d3 = v.w - pivot;
                s1 += (d0 + d1) + (d2 + d3);
                s2 += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
            }
        } else {
            for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) {
                const double d = __ldg(xr + i) - pivot;
                s1 += d;
                s2 += d * d;
            }
        }
    }
    const double n = static_cast<double>(cpg) * static_cast<double>(hw);
    const double md = block_sum_double(s1) / n; // mean − pivot
    const double var = fmax(block_sum_double(s2) / n - md * md, 0.0);
    const double mean = pivot + md, rstd = rsqrt(var + static_cast<double>(eps));
    for (int k = threadIdx.x; k < cpg; k += blockDim.x) {
        const int ch = g * cpg + k;
        const double gain = weight ? weight[ch] : 1.0, sh = bias ? bias[ch] : 0.0;
        const int64_t o = (b * t + f) * c + ch;
        scale[o] = static_cast<float>(rstd * gain);
        shift[o] = static_cast<float>(sh - mean * rstd * gain);
    }
}

// One thread per N consecutive values of one plane (b, ch, f): N = 4 (one float4) when hw % 4 == 0 and x, y
// are 16-byte aligned, else N = 1.
// y may be x (in place): each thread reads its values before it writes them.
template <int N>
__global__ void group_norm_apply_kernel(const float* x, const float* __restrict__ scale,
                                        const float* __restrict__ shift, float* y, int64_t c, int64_t t,
                                        int64_t hw, int64_t total, bool silu) {
    const int64_t per_plane = hw / N;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t pl = i / per_plane, e = (i - pl * per_plane) * N;
        const int64_t f = pl % t, ch = (pl / t) % c, b = pl / (t * c);
        const int64_t k = (b * t + f) * c + ch;
        const float a = __ldg(scale + k), sh = __ldg(shift + k);
        if constexpr (N == 4) {
            float4 v = *reinterpret_cast<const float4*>(x + pl * hw + e);
            v = make_float4(apply_affine(v.x, a, sh, silu), apply_affine(v.y, a, sh, silu),
                            apply_affine(v.z, a, sh, silu), apply_affine(v.w, a, sh, silu));
            *reinterpret_cast<float4*>(y + pl * hw + e) = v;
        } else {
            y[pl * hw + e] = apply_affine(x[pl * hw + e], a, sh, silu);
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

Status group_norm_stats(const Context& ctx, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, Tensor& scale, Tensor& shift) {
    const int64_t jobs = x.dim(0) * x.dim(2) * p.groups, hw = x.dim(3) * x.dim(4);
    if (jobs == 0) return ok_status();
    if (hw == 0) return unimplemented("group_norm_stats (CUDA): empty frames (no statistics)");
    if (jobs > 2147483647LL)
        return unimplemented("group_norm_stats (CUDA): more than 2^31 (b, t, group) rows");
    const float* xp = x.data_as<const float>();
    const float* wp = weight.defined() ? weight.data_as<const float>() : nullptr;
    const float* bp = bias.defined() ? bias.data_as<const float>() : nullptr;
    const int c = static_cast<int>(x.dim(1)), t = static_cast<int>(x.dim(2));
    const unsigned grid = static_cast<unsigned>(jobs);
    if (hw % 4 == 0 && pointer_alignment(xp) >= 16)
        group_norm_stats_kernel<true><<<grid, kGnThreads, 0, stream_of(ctx)>>>(
            xp, wp, bp, scale.data_as<float>(), shift.data_as<float>(), c, t, hw, p.groups, p.eps);
    else
        group_norm_stats_kernel<false><<<grid, kGnThreads, 0, stream_of(ctx)>>>(
            xp, wp, bp, scale.data_as<float>(), shift.data_as<float>(), c, t, hw, p.groups, p.eps);
    return check_launch("group_norm_stats");
}

Status group_norm_apply(const Context& ctx, const GroupNormApplyParams& p, const Tensor& x,
                        const Tensor& scale, const Tensor& shift, Tensor& y) {
    if (x.numel() == 0) return ok_status();
    const int64_t hw = x.dim(3) * x.dim(4);
    const float* xp = x.data_as<const float>();
    float* yp = y.data_as<float>();
    const float* sc = scale.data_as<const float>();
    const float* sh = shift.data_as<const float>();
    constexpr int kBlock = 256;
    if (hw % 4 == 0 && pointer_alignment(xp) >= 16 && pointer_alignment(yp) >= 16) {
        const int64_t total = x.numel() / 4;
        group_norm_apply_kernel<4><<<grid_for(total, kBlock), kBlock, 0, stream_of(ctx)>>>(
            xp, sc, sh, yp, x.dim(1), x.dim(2), hw, total, p.silu);
    } else {
        group_norm_apply_kernel<1><<<grid_for(x.numel(), kBlock), kBlock, 0, stream_of(ctx)>>>(
            xp, sc, sh, yp, x.dim(1), x.dim(2), hw, x.numel(), p.silu);
    }
    return check_launch("group_norm_apply");
}

} // namespace h3::ops::cuda_impl
