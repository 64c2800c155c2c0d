// Small helpers shared by the CPU references: typed row loads/stores through fp32 and index reads. The dtype
// switch sits outside the element loop so the loops stay tight.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"

#include <cstdint>

namespace h3::ops::cpu_impl {

// dst[i] = float(src[i]) for i < n; src is an array of `t` (f32, bf16 or f16).
inline void load_f32(const void* src, DType t, float* dst, int64_t n) {
    switch (t) {
    case DType::kF32: {
        const float* s = static_cast<const float*>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
        break;
    }
    case DType::kBF16: {
        const uint16_t* s = static_cast<const uint16_t*>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
        break;
    }
    case DType::kF16: {
        const uint16_t* s = static_cast<const uint16_t*>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
        break;
    }
    default:
        H3_CHECK(false, "load_f32: unsupported dtype " << dtype_name(t));
    }
}

// dst[i] = round_to_t(src[i]) for i < n (nearest-even).
inline void store_f32(const float* src, void* dst, DType t, int64_t n) {
    switch (t) {
    case DType::kF32: {
        float* d = static_cast<float*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = src[i];
        break;
    }
    case DType::kBF16: {
        uint16_t* d = static_cast<uint16_t*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
        break;
    }
    case DType::kF16: {
        uint16_t* d = static_cast<uint16_t*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
        break;
    }
    default:
        H3_CHECK(false, "store_f32: unsupported dtype " << dtype_name(t));
    }
}

// The value `v` would have after a store to and load from dtype `t`.
inline float round_to(float v, DType t) {
    switch (t) {
    case DType::kBF16:
        return round_bf16(v);
    case DType::kF16:
        return round_f16(v);
    default:
        return v;
    }
}

// In-place rounding of a row to dtype `t` (no-op for f32).
inline void round_row(float* v, DType t, int64_t n) {
    if (t == DType::kF32) return;
    for (int64_t i = 0; i < n; ++i) v[i] = round_to(v[i], t);
}

// Address of element `elem` of tensor `t` (element offset, dtype-sized).
inline const void* elem_ptr(const Tensor& t, int64_t elem) {
    return static_cast<const uint8_t*>(t.data()) + elem * static_cast<int64_t>(dtype_size(t.dtype()));
}
inline void* elem_ptr_mut(const Tensor& t, int64_t elem) {
    return static_cast<uint8_t*>(t.data()) + elem * static_cast<int64_t>(dtype_size(t.dtype()));
}

// index[i] of an i32 or i64 vector.
inline int64_t load_index(const Tensor& index, int64_t i) {
    return index.dtype() == DType::kI32 ? index.data_as<const int32_t>()[i]
                                        : index.data_as<const int64_t>()[i];
}

} // namespace h3::ops::cpu_impl
