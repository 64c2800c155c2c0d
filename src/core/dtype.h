// Element types and exact scalar conversions (bf16/f16 round-to-nearest-even, fp8 e4m3 saturating).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace h3 {

enum class DType : uint8_t { kF32, kF16, kBF16, kF8E4M3, kI8, kU8, kI32, kI64, kBool, kF64 };

size_t dtype_size(DType t);
// Names used in messages and CLI flags: f32, f16, bf16, f8_e4m3, i8, u8, i32, i64, bool, f64.
const char* dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
// safetensors names: F32, F16, BF16, F8_E4M3, I8, U8, I32, I64, BOOL, F64.
const char* dtype_safetensors_name(DType t);
std::optional<DType> parse_safetensors_dtype(std::string_view name);
bool dtype_is_float(DType t);

// ---- scalar conversions
// -------------------------------------------------------------------------------------
inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float f32_from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline float bf16_to_f32(uint16_t h) {
    return f32_from_bits(static_cast<uint32_t>(h) << 16);
}
inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40); // quiet NaN
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding) >> 16);
}
// Round an fp32 value to the nearest bf16 value, returned as fp32.
inline float round_bf16(float f) {
    return bf16_to_f32(f32_to_bf16(f));
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
inline float round_f16(float f) {
    return f16_to_f32(f32_to_f16(f));
}

// OCP fp8 e4m3fn: no infinities, max 448, NaN = 0x7f/0xff. Conversion saturates to ±448.
float f8e4m3_to_f32(uint8_t v);
uint8_t f32_to_f8e4m3(float f);

// Generic element access for any dtype (slow; for references, tests and conversions).
double load_as_f64(const void* base, DType t, size_t index);
void store_from_f64(void* base, DType t, size_t index, double v);

// Convert a contiguous array between dtypes (float rounding as above; ints truncate toward zero).
void convert_array(const void* src, DType src_type, void* dst, DType dst_type, size_t count);

} // namespace h3
