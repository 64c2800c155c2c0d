// Device-side helpers shared by the op kernels: dtype conversion through fp32, 16-byte vector access and
// host-side dispatch from a DType to a C++ element type. Private to ops/cuda (.cu files only).
#pragma once

#include "ops/cuda/cuda_common.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

namespace h3::ops::cuda_detail {

using bf16 = __nv_bfloat16;
using f16 = __half;
using f8e4m3 = __nv_fp8_e4m3;

// ---- scalar conversion
// ---------------------------------------------------------------------------------------
template <typename T> __device__ __forceinline__ float to_f32(T v) {
    if constexpr (std::is_same_v<T, float>)
        return v;
    else if constexpr (std::is_same_v<T, bf16>)
        return __bfloat162float(v);
    else if constexpr (std::is_same_v<T, f16>)
        return __half2float(v);
    else if constexpr (std::is_same_v<T, f8e4m3>)
        return static_cast<float>(v);
    else
        return static_cast<float>(v);
}

// Round-to-nearest-even for bf16/f16; the fp8 constructor saturates to ±448 (__NV_SATFINITE).
template <typename T> __device__ __forceinline__ T from_f32(float v) {
    if constexpr (std::is_same_v<T, float>)
        return v;
    else if constexpr (std::is_same_v<T, bf16>)
        return __float2bfloat16_rn(v);
    else if constexpr (std::is_same_v<T, f16>)
        return __float2half_rn(v);
    else if constexpr (std::is_same_v<T, f8e4m3>)
        return f8e4m3(v);
    else
        return static_cast<T>(v);
}

// The value `v` takes once stored as T (the "round to y's dtype" of the bf16-emulation flags).
template <typename T> __device__ __forceinline__ float round_to(float v) {
    return to_f32(from_f32<T>(v));
}

// ---- vector access: N consecutive elements as fp32
// -------------------------------------------------------------- With N == 8 the pointer must be 16-byte
// aligned (f32 takes two 16-byte accesses); the host side checks the alignment of every pointer and the row
// length before it picks N = 8.
template <int N, typename T> __device__ __forceinline__ void load_vec(const T* p, float (&v)[N]) {
    if constexpr (N == 8 && sizeof(T) == 2) {
        uint4 raw = *reinterpret_cast<const uint4*>(p);
        const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = to_f32(e[i]);
    } else if constexpr (N == 8 && sizeof(T) == 4) {
        float4 a = reinterpret_cast<const float4*>(p)[0];
        float4 b = reinterpret_cast<const float4*>(p)[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) v[i] = to_f32(p[i]);
    }
}

template <int N, typename T> __device__ __forceinline__ void store_vec(T* p, const float (&v)[N]) {
    if constexpr (N == 8 && sizeof(T) == 2) {
        uint4 raw;
        T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
        for (int i = 0; i < 8; ++i) e[i] = from_f32<T>(v[i]);
        *reinterpret_cast<uint4*>(p) = raw;
    } else if constexpr (N == 8 && sizeof(T) == 4) {
        reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
        reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) p[i] = from_f32<T>(v[i]);
    }
}

// Elements of an f32/bf16/f16 array whose type is known only at run time (weights and small tables:
// the branch is uniform across the grid, so it costs no divergence).
__device__ __forceinline__ float load_any(const void* p, int dtype, int64_t i) {
    switch (dtype) {
    case static_cast<int>(DType::kBF16):
        return __bfloat162float(static_cast<const bf16*>(p)[i]);
    case static_cast<int>(DType::kF16):
        return __half2float(static_cast<const f16*>(p)[i]);
    default:
        return static_cast<const float*>(p)[i];
    }
}

__device__ __forceinline__ int64_t load_index(const void* p, bool is64, int64_t i) {
    return is64 ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    float r = total;
    __syncthreads(); // `partial`/`total` may be reused by a following call
    return r;
}

// SiLU as silu/swiglu compute it (and the fused swiglu_fp8, which must round the same values).
__device__ __forceinline__ float silu_f(float v) {
    return v / (1.0f + __expf(-v));
}

// ---- host-side dispatch
// ------------------------------------------------------------------------------------------
template <typename T> struct TypeTag { using type = T; };

// Calls f(TypeTag<T>{}) for the float dtypes the elementwise ops accept (f32, bf16, f16).
template <typename F> Status dispatch_float(DType t, F&& f) {
    switch (t) {
    case DType::kF32:
        return f(TypeTag<float>{});
    case DType::kBF16:
        return f(TypeTag<bf16>{});
    case DType::kF16:
        return f(TypeTag<f16>{});
    default:
        return unimplemented(std::string("CUDA op: unsupported float dtype ") + dtype_name(t));
    }
}

// Every dtype `cast` accepts.
template <typename F> Status dispatch_any(DType t, F&& f) {
    switch (t) {
    case DType::kF32:
        return f(TypeTag<float>{});
    case DType::kBF16:
        return f(TypeTag<bf16>{});
    case DType::kF16:
        return f(TypeTag<f16>{});
    case DType::kF8E4M3:
        return f(TypeTag<f8e4m3>{});
    case DType::kF64:
        return f(TypeTag<double>{});
    case DType::kI8:
        return f(TypeTag<int8_t>{});
    case DType::kU8:
        return f(TypeTag<uint8_t>{});
    case DType::kI32:
        return f(TypeTag<int32_t>{});
    case DType::kI64:
        return f(TypeTag<int64_t>{});
    case DType::kBool:
        return f(TypeTag<bool>{});
    }
    return unimplemented("CUDA cast: unknown dtype");
}

inline unsigned grid_for(int64_t work_items, int block, int64_t max_blocks = 65535LL * 16) {
    int64_t g = (work_items + block - 1) / block;
    if (g < 1) g = 1;
    if (g > max_blocks) g = max_blocks;
    return static_cast<unsigned>(g);
}

} // namespace h3::ops::cuda_detail

namespace h3::ops::cuda_detail {

// load_vec for an f32/bf16/f16 array whose dtype is known only at run time (tables and weights).
template <int N>
__device__ __forceinline__ void load_vec_any(const void* p, int dtype, int64_t offset, float (&v)[N]) {
    switch (dtype) {
    case static_cast<int>(DType::kBF16):
        load_vec<N>(static_cast<const bf16*>(p) + offset, v);
        break;
    case static_cast<int>(DType::kF16):
        load_vec<N>(static_cast<const f16*>(p) + offset, v);
        break;
    default:
        load_vec<N>(static_cast<const float*>(p) + offset, v);
        break;
    }
}

// Threads for a one-block-per-row kernel of `chunks` accesses a row: a multiple of 32 in [32, 256]. The row
// norms (norm.cu) and the fused fp8 norm (fp8_fused.cu) share it, so both sum a row in the same order.
inline int row_block(int64_t chunks) {
    int64_t b = ((chunks + 31) / 32) * 32;
    return static_cast<int>(b < 32 ? 32 : (b > 256 ? 256 : b));
}

// Whether a 2-D table (row pitch in elements) supports 16-byte access of 8-element chunks.
inline bool table_vec8_ok(const Tensor& t) {
    return pointer_alignment(t.data()) >= 16 &&
           (t.stride(0) * static_cast<int64_t>(dtype_size(t.dtype()))) % 16 == 0;
}

} // namespace h3::ops::cuda_detail
