// Elementwise ops (silu, gelu, swiglu, geglu, cast, add) and row gather/scatter. Memory-bound: 16-byte
// accesses when every pointer and the row length allow them, fp32 math, one rounding at the store.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kBlock = 256;

bool vec8_ok(int64_t n, std::initializer_list<const void*> ptrs) {
    if (n % 8 != 0) return false;
    for (const void* p : ptrs)
        if (pointer_alignment(p) < 16) return false;
    return true;
}

template <int N, typename TX, typename TY>
__global__ void silu_kernel(const TX* __restrict__ x, TY* __restrict__ y, int64_t chunks) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float v[N];
        load_vec<N>(x + i * N, v);
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = silu_f(v[j]);
        store_vec<N>(y + i * N, v);
    }
}

// GELU (erf) as x·Φ(x) = 0.5·x·erfc(−x/√2): the same function as 0.5·x·(1 + erf(x/√2)) without its
// cancellation for negative x (1 + erf(x/√2) → 0 in fp32 loses every bit below 2⁻²⁴; erfc keeps ~4 ulp).
template <bool kTanh> __device__ __forceinline__ float gelu_f(float a) {
    return kTanh ? 0.5f * a * (1.0f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)))
                 : 0.5f * a * erfcf(-a * 0.7071067811865476f);
}

template <int N, bool kTanh, typename TX, typename TY>
__global__ void gelu_kernel(const TX* __restrict__ x, TY* __restrict__ y, int64_t chunks) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float v[N];
        load_vec<N>(x + i * N, v);
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = gelu_f<kTanh>(v[j]);
        store_vec<N>(y + i * N, v);
    }
}

// GeGLU over rows [value | gate]: one thread per N outputs of a row.
template <int N, bool kTanh, typename TX, typename TY>
__global__ void geglu_kernel(const TX* __restrict__ x, TY* __restrict__ y, int64_t rows, int64_t f) {
    const int64_t per_row = f / N, chunks = rows * per_row;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = i / per_row, c = (i - r * per_row) * N;
        float val[N], gate[N];
        load_vec<N>(x + r * 2 * f + c, val);
        load_vec<N>(x + r * 2 * f + f + c, gate);
#pragma unroll
        for (int j = 0; j < N; ++j) val[j] *= gelu_f<kTanh>(gate[j]);
        store_vec<N>(y + r * f + c, val);
    }
}

template <int N, typename TX, typename TY>
__global__ void swiglu_kernel(const TX* __restrict__ x, TY* __restrict__ y, int64_t rows, int64_t f) {
    const int64_t per_row = f / N, chunks = rows * per_row;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        int64_t r = i / per_row, c = (i - r * per_row) * N;
        float val[N], gate[N];
        load_vec<N>(x + r * 2 * f + c, val);
        load_vec<N>(x + r * 2 * f + f + c, gate);
#pragma unroll
        for (int j = 0; j < N; ++j) val[j] *= silu_f(gate[j]);
        store_vec<N>(y + r * f + c, val);
    }
}

// y may alias x or z (each element is read before it is written by the same thread): no __restrict__.
template <int N, typename TX, typename TZ, typename TY>
__global__ void axpby_kernel(float alpha, const TX* x, float beta, const TZ* z, TY* y, int64_t chunks) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float a[N], b[N];
        load_vec<N>(x + i * N, a);
        load_vec<N>(z + i * N, b);
#pragma unroll
        for (int j = 0; j < N; ++j) a[j] = __fadd_rn(__fmul_rn(alpha, a[j]), __fmul_rn(beta, b[j]));
        store_vec<N>(y + i * N, a);
    }
}

// ---- cast: any dtype to any dtype
// ------------------------------------------------------------------------------
template <typename T>
constexpr bool kWide = std::is_same_v<T, double> || std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>;

template <typename T> __device__ __forceinline__ double to_f64(T v) {
    if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16> || std::is_same_v<T, f8e4m3>)
        return static_cast<double>(to_f32(v));
    else
        return static_cast<double>(v);
}

template <typename D, typename S> __device__ __forceinline__ D convert(S s) {
    if constexpr (std::is_same_v<D, S>) {
        return s;
    } else if constexpr (kWide<D> || kWide<S>) {
        // int32/int64/f64 values need more than fp32's 24 bits on the way; narrow floats round from fp32
        // (the order the CPU reference's convert_array uses).
        double d = to_f64(s);
        if constexpr (std::is_same_v<D, bf16> || std::is_same_v<D, f16> || std::is_same_v<D, f8e4m3>)
            return from_f32<D>(static_cast<float>(d));
        else
            return static_cast<D>(d);
    } else {
        return from_f32<D>(to_f32(s));
    }
}

template <typename S, typename D>
__global__ void cast_kernel(const S* __restrict__ x, D* __restrict__ y, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[i] = convert<D>(x[i]);
}

template <int N, typename S, typename D>
__global__ void cast_vec_kernel(const S* __restrict__ x, D* __restrict__ y, int64_t chunks) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float v[N];
        load_vec<N>(x + i * N, v);
        store_vec<N>(y + i * N, v);
    }
}

template <typename T>
constexpr bool kFloat16or32 = std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

// ---- gather / scatter
// --------------------------------------------------------------------------------------- One output row per
// block-row of threads; rows whose index is out of range are skipped (the dispatcher does not check device
// index values).
template <int N, typename TS, typename TD, bool kScatter>
__global__ void rows_kernel(const TS* __restrict__ src, TD* __restrict__ dst, const void* __restrict__ index,
                            bool idx64, int64_t m, int64_t limit, int64_t d) {
    const int64_t per_row = d / N, chunks = m * per_row;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        int64_t r = i / per_row, c = (i - r * per_row) * N;
        int64_t t = load_index(index, idx64, r);
        if (t < 0 || t >= limit) continue;
        int64_t s_row = kScatter ? r : t, d_row = kScatter ? t : r;
        float v[N];
        load_vec<N>(src + s_row * d + c, v);
        store_vec<N>(dst + d_row * d + c, v);
    }
}

template <typename TS, typename TD, bool kScatter>
Status launch_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst) {
    const int64_t m = index.numel();
    const int64_t d = src.rank() > 1 ? src.numel() / src.dim(0) : 1;
    const int64_t limit = kScatter ? dst.dim(0) : src.dim(0);
    if (m == 0 || d == 0) return ok_status();
    const bool i64 = index.dtype() == DType::kI64;
    auto s = src.data_as<const TS>();
    auto t = dst.data_as<TD>();
    if (vec8_ok(d, {s, t})) {
        rows_kernel<8, TS, TD, kScatter><<<grid_for(m * d / 8, kBlock), kBlock, 0, stream_of(ctx)>>>(
            s, t, index.data(), i64, m, limit, d);
    } else {
        rows_kernel<1, TS, TD, kScatter>
            <<<grid_for(m * d, kBlock), kBlock, 0, stream_of(ctx)>>>(s, t, index.data(), i64, m, limit, d);
    }
    return check_launch(kScatter ? "scatter_rows" : "gather_rows");
}

} // namespace

Status silu(const Context& ctx, const Tensor& x, Tensor& y) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    return dispatch_float(x.dtype(), [&](auto tx) {
        return dispatch_float(y.dtype(), [&](auto ty) {
            using TX = typename decltype(tx)::type;
            using TY = typename decltype(ty)::type;
            auto xp = x.data_as<const TX>();
            auto yp = y.data_as<TY>();
            if (vec8_ok(n, {xp, yp}))
                silu_kernel<8><<<grid_for(n / 8, kBlock), kBlock, 0, stream_of(ctx)>>>(xp, yp, n / 8);
            else
                silu_kernel<1><<<grid_for(n, kBlock), kBlock, 0, stream_of(ctx)>>>(xp, yp, n);
            return check_launch("silu");
        });
    });
}

Status gelu(const Context& ctx, const GeluParams& p, const Tensor& x, Tensor& y) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    return dispatch_float(x.dtype(), [&](auto tx) {
        return dispatch_float(y.dtype(), [&](auto ty) {
            using TX = typename decltype(tx)::type;
            using TY = typename decltype(ty)::type;
            auto xp = x.data_as<const TX>();
            auto yp = y.data_as<TY>();
            const bool v8 = vec8_ok(n, {xp, yp});
            const int64_t chunks = v8 ? n / 8 : n;
            const auto grid = grid_for(chunks, kBlock);
            auto s = stream_of(ctx);
            if (v8 && p.tanh)
                gelu_kernel<8, true><<<grid, kBlock, 0, s>>>(xp, yp, chunks);
            else if (v8)
                gelu_kernel<8, false><<<grid, kBlock, 0, s>>>(xp, yp, chunks);
            else if (p.tanh)
                gelu_kernel<1, true><<<grid, kBlock, 0, s>>>(xp, yp, chunks);
            else
                gelu_kernel<1, false><<<grid, kBlock, 0, s>>>(xp, yp, chunks);
            return check_launch("gelu");
        });
    });
}

Status swiglu(const Context& ctx, const Tensor& x, Tensor& y) {
    const int64_t f = y.dim(-1);
    const int64_t rows = f == 0 ? 0 : y.numel() / f;
    if (rows == 0 || f == 0) return ok_status();
    return dispatch_float(x.dtype(), [&](auto tx) {
        return dispatch_float(y.dtype(), [&](auto ty) {
            using TX = typename decltype(tx)::type;
            using TY = typename decltype(ty)::type;
            auto xp = x.data_as<const TX>();
            auto yp = y.data_as<TY>();
            if (vec8_ok(f, {xp, yp}))
                swiglu_kernel<8>
                    <<<grid_for(rows * f / 8, kBlock), kBlock, 0, stream_of(ctx)>>>(xp, yp, rows, f);
            else
                swiglu_kernel<1><<<grid_for(rows * f, kBlock), kBlock, 0, stream_of(ctx)>>>(xp, yp, rows, f);
            return check_launch("swiglu");
        });
    });
}

Status geglu(const Context& ctx, const GeluParams& p, const Tensor& x, Tensor& y) {
    const int64_t f = y.dim(-1);
    const int64_t rows = f == 0 ? 0 : y.numel() / f;
    if (rows == 0 || f == 0) return ok_status();
    return dispatch_float(x.dtype(), [&](auto tx) {
        return dispatch_float(y.dtype(), [&](auto ty) {
            using TX = typename decltype(tx)::type;
            using TY = typename decltype(ty)::type;
            auto xp = x.data_as<const TX>();
            auto yp = y.data_as<TY>();
            const bool v8 = vec8_ok(f, {xp, yp});
            const int64_t chunks = v8 ? rows * f / 8 : rows * f;
            const auto grid = grid_for(chunks, kBlock);
            auto s = stream_of(ctx);
            if (v8 && p.tanh)
                geglu_kernel<8, true><<<grid, kBlock, 0, s>>>(xp, yp, rows, f);
            else if (v8)
                geglu_kernel<8, false><<<grid, kBlock, 0, s>>>(xp, yp, rows, f);
            else if (p.tanh)
                geglu_kernel<1, true><<<grid, kBlock, 0, s>>>(xp, yp, rows, f);
            else
                geglu_kernel<1, false><<<grid, kBlock, 0, s>>>(xp, yp, rows, f);
            return check_launch("geglu");
        });
    });
}

// add is axpby(1, x, 1, z): the products by 1 are exact, so the sum rounds exactly as x + z.
Status add(const Context& ctx, const Tensor& x, const Tensor& z, Tensor& y) {
    return cuda_impl::axpby(ctx, 1.0f, x, 1.0f, z, y);
}

Status axpby(const Context& ctx, float alpha, const Tensor& x, float beta, const Tensor& z, Tensor& y) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    return dispatch_float(x.dtype(), [&](auto tx) {
        return dispatch_float(z.dtype(), [&](auto tz) {
            return dispatch_float(y.dtype(), [&](auto ty) {
                using TX = typename decltype(tx)::type;
                using TZ = typename decltype(tz)::type;
                using TY = typename decltype(ty)::type;
                auto xp = x.data_as<const TX>();
                auto zp = z.data_as<const TZ>();
                auto yp = y.data_as<TY>();
                if (vec8_ok(n, {xp, zp, yp}))
                    axpby_kernel<8><<<grid_for(n / 8, kBlock), kBlock, 0, stream_of(ctx)>>>(alpha, xp, beta,
                                                                                            zp, yp, n / 8);
                else
                    axpby_kernel<1>
                        <<<grid_for(n, kBlock), kBlock, 0, stream_of(ctx)>>>(alpha, xp, beta, zp, yp, n);
                return check_launch("axpby");
            });
        });
    });
}

Status cast(const Context& ctx, const Tensor& x, Tensor& y) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    return dispatch_any(x.dtype(), [&](auto tx) {
        return dispatch_any(y.dtype(), [&](auto ty) {
            using S = typename decltype(tx)::type;
            using D = typename decltype(ty)::type;
            auto xp = x.data_as<const S>();
            auto yp = y.data_as<D>();
            if constexpr (kFloat16or32<S> && kFloat16or32<D>) {
                if (vec8_ok(n, {xp, yp})) {
                    cast_vec_kernel<8><<<grid_for(n / 8, kBlock), kBlock, 0, stream_of(ctx)>>>(xp, yp, n / 8);
                    return check_launch("cast");
                }
            }
            cast_kernel<<<grid_for(n, kBlock), kBlock, 0, stream_of(ctx)>>>(xp, yp, n);
            return check_launch("cast");
        });
    });
}

Status gather_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst) {
    return dispatch_float(src.dtype(), [&](auto ts) {
        return dispatch_float(dst.dtype(), [&](auto td) {
            return launch_rows<typename decltype(ts)::type, typename decltype(td)::type, false>(ctx, src,
                                                                                                index, dst);
        });
    });
}

Status scatter_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst) {
    return dispatch_float(src.dtype(), [&](auto ts) {
        return dispatch_float(dst.dtype(), [&](auto td) {
            return launch_rows<typename decltype(ts)::type, typename decltype(td)::type, true>(ctx, src,
                                                                                               index, dst);
        });
    });
}

} // namespace h3::ops::cuda_impl
