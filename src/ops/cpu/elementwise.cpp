// CPU elementwise references. Flat ops run over fixed-size chunks so each thread widens a chunk to fp32
// once, computes, and rounds once at the store.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace h3::ops::cpu_impl {

namespace {

constexpr int64_t kChunk = 4096;

inline float silu_f(float v) {
    return v / (1.0f + std::exp(-v));
}

inline float gelu_tanh_f(float v) {
    const float k = 0.7978845608028654f; // sqrt(2/pi)
    return 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
}

// x·Φ(x) = 0.5·x·erfc(−x/√2): equal to 0.5·x·(1 + erf(x/√2)), which cancels for negative x in fp32.
inline float gelu_erf_f(float v) {
    return 0.5f * v * std::erfc(-v * 0.7071067811865476f);
}

// y[i] = f(x[i]) for flat contiguous x/y of `n` elements.
template <typename F> void unary_flat(const Tensor& x, Tensor& y, F f) {
    const int64_t n = x.numel();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel
    {
        std::vector<float> buf(static_cast<size_t>(kChunk));
#pragma omp for schedule(static)
        for (int64_t c = 0; c < chunks; ++c) {
            const int64_t i0 = c * kChunk, len = std::min(kChunk, n - i0);
            load_f32(elem_ptr(x, i0), x.dtype(), buf.data(), len);
            for (int64_t i = 0; i < len; ++i) buf[i] = f(buf[i]);
            store_f32(buf.data(), elem_ptr_mut(y, i0), y.dtype(), len);
        }
    }
}

} // namespace

Status silu(const Context&, const Tensor& x, Tensor& y) {
    unary_flat(x, y, silu_f);
    return ok_status();
}

Status gelu(const Context&, const GeluParams& p, const Tensor& x, Tensor& y) {
    if (p.tanh)
        unary_flat(x, y, gelu_tanh_f);
    else
        unary_flat(x, y, gelu_erf_f);
    return ok_status();
}

Status swiglu(const Context&, const Tensor& x, Tensor& y) {
    const int64_t rows = x.dim(0), f = y.dim(1);
#pragma omp parallel
    {
        std::vector<float> val(static_cast<size_t>(f)), gate(static_cast<size_t>(f));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            load_f32(elem_ptr(x, r * 2 * f), x.dtype(), val.data(), f);
            load_f32(elem_ptr(x, r * 2 * f + f), x.dtype(), gate.data(), f);
            for (int64_t c = 0; c < f; ++c) val[c] *= silu_f(gate[c]);
            store_f32(val.data(), elem_ptr_mut(y, r * f), y.dtype(), f);
        }
    }
    return ok_status();
}

Status geglu(const Context&, const GeluParams& p, const Tensor& x, Tensor& y) {
    const int64_t rows = x.dim(0), f = y.dim(1);
#pragma omp parallel
    {
        std::vector<float> val(static_cast<size_t>(f)), gate(static_cast<size_t>(f));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            load_f32(elem_ptr(x, r * 2 * f), x.dtype(), val.data(), f);
            load_f32(elem_ptr(x, r * 2 * f + f), x.dtype(), gate.data(), f);
            for (int64_t c = 0; c < f; ++c) val[c] *= p.tanh ? gelu_tanh_f(gate[c]) : gelu_erf_f(gate[c]);
            store_f32(val.data(), elem_ptr_mut(y, r * f), y.dtype(), f);
        }
    }
    return ok_status();
}

Status cast(const Context&, const Tensor& x, Tensor& y) {
    // convert_array handles every dtype pair (fp8 saturating, ints truncating); chunked for threads.
    const int64_t n = x.numel();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t i0 = c * kChunk, len = std::min(kChunk, n - i0);
        convert_array(elem_ptr(x, i0), x.dtype(), elem_ptr_mut(y, i0), y.dtype(), static_cast<size_t>(len));
    }
    return ok_status();
}

// add is axpby(1, x, 1, z): the products by 1 are exact, so the sum rounds exactly as x + z.
Status add(const Context& ctx, const Tensor& x, const Tensor& z, Tensor& y) {
    return cpu_impl::axpby(ctx, 1.0f, x, 1.0f, z, y);
}

Status axpby(const Context&, float alpha, const Tensor& x, float beta, const Tensor& z, Tensor& y) {
    const int64_t n = x.numel();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel
    {
        std::vector<float> a(static_cast<size_t>(kChunk)), b(static_cast<size_t>(kChunk));
#pragma omp for schedule(static)
        for (int64_t c = 0; c < chunks; ++c) {
            const int64_t i0 = c * kChunk, len = std::min(kChunk, n - i0);
            load_f32(elem_ptr(x, i0), x.dtype(), a.data(), len);
            load_f32(elem_ptr(z, i0), z.dtype(), b.data(), len);
            for (int64_t i = 0; i < len; ++i) {
                const float p = alpha * a[i], q = beta * b[i]; // ISO C++ mode: no contraction into an fma
                a[i] = p + q;
            }
            store_f32(a.data(), elem_ptr_mut(y, i0), y.dtype(), len);
        }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
