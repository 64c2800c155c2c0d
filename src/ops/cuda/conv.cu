// CUDA halves of conv1d, conv_transpose1d, snake_beta, snake, alias_free_snake_beta, clamp and layer_norm.
// Direct kernels (one thread per output sample, fp32 accumulation): the audio decoder's convolutions are
// narrow and long, so consecutive threads walk consecutive time steps (coalesced x reads) while the weight
// reads are warp-uniform broadcasts.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kConvBlock = 256;

__global__ void conv1d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ bias, float* __restrict__ y, int64_t cin, int64_t len,
                              int64_t cout, int64_t k, int64_t lout, int stride, int padding, int dilation,
                              int groups) {
    const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t co = blockIdx.y;
    const int64_t b = blockIdx.z;
    if (t >= lout) return;
    const int64_t cig = cin / groups, cog = cout / groups, g = co / cog;
    const float* xb = x + (b * cin + g * cig) * len;
    const float* wr = w + co * cig * k;
    float acc = bias ? bias[co] : 0.0f;
    const int64_t base = t * stride - padding;
    for (int64_t ci = 0; ci < cig; ++ci) {
        const float* xr = xb + ci * len;
        const float* wk = wr + ci * k;
        for (int64_t kk = 0; kk < k; ++kk) {
            const int64_t s = base + kk * dilation;
            if (s >= 0 && s < len) acc += __ldg(wk + kk) * xr[s];
        }
    }
    y[(b * cout + co) * lout + t] = acc;
}

__global__ void conv_transpose1d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ bias, float* __restrict__ y, int64_t cin,
                                        int64_t len, int64_t cog, int64_t k, int64_t lout, int stride,
                                        int padding, int groups) {
    const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t co = blockIdx.y;
    const int64_t b = blockIdx.z;
    if (t >= lout) return;
    const int64_t cout = cog * groups, cig = cin / groups, g = co / cog, cl = co % cog;
    float acc = bias ? bias[co] : 0.0f;
    const int64_t n = t + padding;
    for (int64_t kk = 0; kk < k; ++kk) {
        const int64_t num = n - kk;
        if (num < 0 || num % stride) continue;
        const int64_t l = num / stride;
        if (l >= len) continue;
        for (int64_t ci = 0; ci < cig; ++ci) {
            const int64_t c = g * cig + ci;
            acc += x[(b * cin + c) * len + l] * __ldg(w + (c * cog + cl) * k + kk);
        }
    }
    y[(b * cout + co) * lout + t] = acc;
}

__device__ __forceinline__ float snake_f(float v, float a, float inv_b) {
    const float s = sinf(a * v);
    return v + inv_b * (s * s);
}

__global__ void snake_beta_kernel(const float* __restrict__ x, const float* __restrict__ alpha,
                                  const float* __restrict__ beta, float* __restrict__ y, int64_t c,
                                  int64_t len, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t ch = (i / len) % c;
        const float a = expf(alpha[ch]);
        const float inv_b = 1.0f / (expf(beta[ch]) + 1e-9f);
        y[i] = snake_f(x[i], a, inv_b);
    }
}

// DAC Snake: alpha in linear space.
__global__ void snake_kernel(const float* __restrict__ x, const float* __restrict__ alpha,
                             float* __restrict__ y, int64_t c, int64_t len, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float a = alpha[(i / len) % c];
        y[i] = snake_f(x[i], a, 1.0f / (a + 1e-9f));
    }
}

constexpr int kMaxTaps = 64;

// One thread per output sample: recomputes the K upsampled-and-activated samples it needs (the replicate
// padding of the activated signal clamps indices into [0, r·L)).
__global__ void alias_free_kernel(const float* __restrict__ x, const float* __restrict__ alpha,
                                  const float* __restrict__ beta, const float* __restrict__ fu,
                                  const float* __restrict__ fd, float* __restrict__ y, int64_t c, int64_t len,
                                  int k, int r) {
    __shared__ float su[kMaxTaps], sd[kMaxTaps];
    if (threadIdx.x < k) {
        su[threadIdx.x] = fu[threadIdx.x];
        sd[threadIdx.x] = fd[threadIdx.x];
    }
    __syncthreads();
    const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t row = blockIdx.y;
    if (t >= len) return;
    const int64_t ch = row % c;
    const float a = expf(alpha[ch]);
    const float inv_b = 1.0f / (expf(beta[ch]) + 1e-9f);
    const float* xr = x + row * len;
    const int64_t pad = k / r - 1, crop_left = pad * r + (k - r) / 2, up_len = r * len;
    const int64_t down_pad_left = k / 2 - 1;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
        int64_t m = r * t + j - down_pad_left;
        m = m < 0 ? 0 : (m >= up_len ? up_len - 1 : m);
        const int64_t n = m + crop_left;
        int64_t i0 = (n - k + r) / r;
        if (i0 < 0) i0 = 0;
        float u = 0.0f;
        for (int64_t i = i0; i * r <= n; ++i) {
            const int64_t tap = n - r * i;
            if (tap >= k) continue;
            int64_t src = i - pad;
            src = src < 0 ? 0 : (src >= len ? len - 1 : src);
            u += xr[src] * su[tap];
        }
        acc += sd[j] * snake_f(static_cast<float>(r) * u, a, inv_b);
    }
    y[row * len + t] = acc;
}

__global__ void clamp_kernel(const float* __restrict__ x, float* __restrict__ y, float lo, float hi,
                             int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[i] = fminf(hi, fmaxf(lo, x[i]));
}

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[i] = alpha * x[i];
}

// One block per row; two passes (mean, then centred variance) over a row that stays in L1/L2.
template <typename TX, typename TY>
__global__ void layer_norm_kernel(const TX* __restrict__ x, TY* __restrict__ y, const void* weight, int wtype,
                                  const void* bias, int btype, int64_t rows, int64_t d, float eps) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const TX* xr = x + r * d;
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) s += to_f32(xr[i]);
        const float mean = block_sum(s) / static_cast<float>(d);
        float q = 0.0f;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            const float e = to_f32(xr[i]) - mean;
            q += e * e;
        }
        const float inv = rsqrtf(block_sum(q) / static_cast<float>(d) + eps);
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            float v = (to_f32(xr[i]) - mean) * inv;
            if (weight) v *= load_any(weight, wtype, i);
            if (bias) v += load_any(bias, btype, i);
            y[r * d + i] = from_f32<TY>(v);
        }
    }
}

dim3 conv_grid(int64_t lout, int64_t channels, int64_t batch) {
    return dim3(static_cast<unsigned>((lout + kConvBlock - 1) / kConvBlock), static_cast<unsigned>(channels),
                static_cast<unsigned>(batch));
}

} // namespace

Status conv1d(const Context& ctx, const Conv1dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y) {
    const int64_t lout = y.dim(2);
    if (y.numel() == 0) return ok_status();
    if (y.dim(1) > 65535 || y.dim(0) > 65535) return unimplemented("conv1d (CUDA): more than 65535 channels");
    conv1d_kernel<<<conv_grid(lout, y.dim(1), y.dim(0)), kConvBlock, 0, stream_of(ctx)>>>(
        x.data_as<const float>(), w.data_as<const float>(),
        bias.defined() ? bias.data_as<const float>() : nullptr, y.data_as<float>(), x.dim(1), x.dim(2),
        w.dim(0), w.dim(2), lout, p.stride, p.padding, p.dilation, p.groups);
    return check_launch("conv1d");
}

Status conv_transpose1d(const Context& ctx, const ConvTranspose1dParams& p, const Tensor& x, const Tensor& w,
                        const Tensor& bias, Tensor& y) {
    const int64_t lout = y.dim(2);
    if (y.numel() == 0) return ok_status();
    if (y.dim(1) > 65535 || y.dim(0) > 65535)
        return unimplemented("conv_transpose1d (CUDA): more than 65535 channels");
    conv_transpose1d_kernel<<<conv_grid(lout, y.dim(1), y.dim(0)), kConvBlock, 0, stream_of(ctx)>>>(
        x.data_as<const float>(), w.data_as<const float>(),
        bias.defined() ? bias.data_as<const float>() : nullptr, y.data_as<float>(), x.dim(1), x.dim(2),
        w.dim(1), w.dim(2), lout, p.stride, p.padding, p.groups);
    return check_launch("conv_transpose1d");
}

Status snake_beta(const Context& ctx, const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    snake_beta_kernel<<<grid_for(n, kConvBlock), kConvBlock, 0, stream_of(ctx)>>>(
        x.data_as<const float>(), alpha.data_as<const float>(), beta.data_as<const float>(),
        y.data_as<float>(), x.dim(1), x.dim(2), n);
    return check_launch("snake_beta");
}

Status snake(const Context& ctx, const Tensor& x, const Tensor& alpha, Tensor& y) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    snake_kernel<<<grid_for(n, kConvBlock), kConvBlock, 0, stream_of(ctx)>>>(
        x.data_as<const float>(), alpha.data_as<const float>(), y.data_as<float>(), x.dim(1), x.dim(2), n);
    return check_launch("snake");
}

Status alias_free_snake_beta(const Context& ctx, const AliasFreeParams& p, const Tensor& x,
                             const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                             const Tensor& down_filter, Tensor& y) {
    const int64_t rows = x.dim(0) * x.dim(1), len = x.dim(2);
    const int k = static_cast<int>(up_filter.dim(0));
    if (rows == 0) return ok_status();
    if (k > kMaxTaps) return unimplemented("alias_free_snake_beta (CUDA): filters longer than 64 taps");
    if (rows > 65535) return unimplemented("alias_free_snake_beta (CUDA): more than 65535 rows");
    dim3 grid(static_cast<unsigned>((len + kConvBlock - 1) / kConvBlock), static_cast<unsigned>(rows));
    alias_free_kernel<<<grid, kConvBlock, 0, stream_of(ctx)>>>(
        x.data_as<const float>(), alpha.data_as<const float>(), beta.data_as<const float>(),
        up_filter.data_as<const float>(), down_filter.data_as<const float>(), y.data_as<float>(), x.dim(1),
        len, k, p.ratio);
    return check_launch("alias_free_snake_beta");
}

Status scale(const Context& ctx, float alpha, const Tensor& x, Tensor& y) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    scale_kernel<<<grid_for(n, kConvBlock), kConvBlock, 0, stream_of(ctx)>>>(x.data_as<const float>(),
                                                                             y.data_as<float>(), alpha, n);
    return check_launch("scale");
}

Status clamp(const Context& ctx, float lo, float hi, const Tensor& x, Tensor& y) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    clamp_kernel<<<grid_for(n, kConvBlock), kConvBlock, 0, stream_of(ctx)>>>(x.data_as<const float>(),
                                                                             y.data_as<float>(), lo, hi, n);
    return check_launch("clamp");
}

Status layer_norm(const Context& ctx, const LayerNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y) {
    const int64_t rows = x.dim(0), d = x.dim(1);
    if (rows == 0 || d == 0) return ok_status();
    return dispatch_float(x.dtype(), [&](auto tx) {
        return dispatch_float(y.dtype(), [&](auto ty) {
            using TX = typename decltype(tx)::type;
            using TY = typename decltype(ty)::type;
            const unsigned grid = static_cast<unsigned>(rows < 65535 * 16 ? rows : 65535 * 16);
            layer_norm_kernel<TX, TY><<<grid, 256, 0, stream_of(ctx)>>>(
                x.data_as<const TX>(), y.data_as<TY>(), weight.defined() ? weight.data() : nullptr,
                weight.defined() ? static_cast<int>(weight.dtype()) : 0,
                bias.defined() ? bias.data() : nullptr, bias.defined() ? static_cast<int>(bias.dtype()) : 0,
                rows, d, p.eps);
            return check_launch("layer_norm");
        });
    });
}

} // namespace h3::ops::cuda_impl
