#include "core/dtype.h"

#include <cmath>
#include <limits>

namespace h3 {

namespace {
struct DTypeInfo {
    DType type;
    size_t size;
    const char* name;
    const char* st_name;
    bool is_float;
};
constexpr DTypeInfo kInfo[] = {
    {DType::kF32, 4, "f32", "F32", true},     {DType::kF16, 2, "f16", "F16", true},
    {DType::kBF16, 2, "bf16", "BF16", true},  {DType::kF8E4M3, 1, "f8_e4m3", "F8_E4M3", true},
    {DType::kI8, 1, "i8", "I8", false},       {DType::kU8, 1, "u8", "U8", false},
    {DType::kI32, 4, "i32", "I32", false},    {DType::kI64, 8, "i64", "I64", false},
    {DType::kBool, 1, "bool", "BOOL", false}, {DType::kF64, 8, "f64", "F64", true},
};
const DTypeInfo& info(DType t) {
    return kInfo[static_cast<int>(t)];
}
} // namespace

size_t dtype_size(DType t) {
    return info(t).size;
}
const char* dtype_name(DType t) {
    return info(t).name;
}
const char* dtype_safetensors_name(DType t) {
    return info(t).st_name;
}
bool dtype_is_float(DType t) {
    return info(t).is_float;
}

std::optional<DType> parse_dtype(std::string_view name) {
    for (const auto& i : kInfo)
        if (name == i.name) return i.type;
    if (name == "fp32" || name == "float32") return DType::kF32;
    if (name == "fp16" || name == "float16") return DType::kF16;
    if (name == "bfloat16") return DType::kBF16;
    return std::nullopt;
}

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
    for (const auto& i : kInfo)
        if (name == i.st_name) return i.type;
    return std::nullopt;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0) return f32_from_bits(sign);
        // subnormal: value = mant * 2^-24
        float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
    return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN
    if (abs >= 0x477ff000u) return sign | 0x7c00u; // rounds to >= 65520 -> inf
    if (abs < 0x38800000u) {
        // result is subnormal (or zero) in f16: units of 2^-24, round half to even
        if (abs < 0x33000000u) return sign; // < 2^-25 rounds to zero
        uint32_t e = abs >> 23;
        uint32_t m = (abs & 0x7fffffu) | 0x800000u;
        // value = m * 2^(e-150); want round(value / 2^-24) = m >> (126 - e)
        uint32_t shift = 126 - e;
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) ++q;
        return sign | static_cast<uint16_t>(q);
    }
    // normal: rebias exponent, round mantissa 23 -> 10 bits, half to even (carry propagates into exponent)
    uint32_t v = abs - 0x38000000u; // exponent bias 127 -> 15
    uint32_t rounding = 0xfffu + ((v >> 13) & 1u);
    v += rounding;
    return sign | static_cast<uint16_t>(v >> 13);
}

float f8e4m3_to_f32(uint8_t v) {
    uint32_t sign = v & 0x80u;
    uint32_t exp = (v >> 3) & 0xfu;
    uint32_t mant = v & 0x7u;
    float r;
    if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
    if (exp == 0)
        r = std::ldexp(static_cast<float>(mant), -9); // subnormal: mant/8 * 2^-6
    else
        r = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, static_cast<int>(exp) - 7);
    return sign ? -r : r;
}

uint8_t f32_to_f8e4m3(float f) {
    if (std::isnan(f)) return 0x7f;
    uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
    float a = std::fabs(f);
    if (a >= 448.0f) return sign | 0x7e; // saturate (inf included)
    // Enumerate: find nearest representable by scaling. Smallest subnormal 2^-9.
    int e;
    std::frexp(a, &e);                        // a = m * 2^e, m in [0.5,1)
    int exp_unbiased = e - 1;                 // a in [2^x, 2^(x+1))
    if (exp_unbiased < -6) exp_unbiased = -6; // subnormal range uses 2^-6 scale with mant/8
    float quantum = std::ldexp(1.0f, exp_unbiased - 3);
    float q = a / quantum; // exact (power-of-two scaling)
    float fl = std::floor(q);
    float rem = q - fl;
    uint32_t n = static_cast<uint32_t>(fl);
    if (rem > 0.5f || (rem == 0.5f && (n & 1u))) ++n;
    // n in [0,16]; n==16 means next binade
    float value = static_cast<float>(n) * quantum;
    if (value >= 448.0f) return sign | 0x7e;
    if (value == 0.0f) return sign;
    int e2;
    std::frexp(value, &e2);
    int ex = e2 - 1;
    if (ex < -6) { // subnormal
        uint32_t m = static_cast<uint32_t>(value / std::ldexp(1.0f, -9));
        return sign | static_cast<uint8_t>(m);
    }
    uint32_t m = static_cast<uint32_t>((value / std::ldexp(1.0f, ex) - 1.0f) * 8.0f);
    return sign | static_cast<uint8_t>(((ex + 7) << 3) | m);
}

double load_as_f64(const void* base, DType t, size_t i) {
    switch (t) {
    case DType::kF32:
        return static_cast<const float*>(base)[i];
    case DType::kF64:
        return static_cast<const double*>(base)[i];
    case DType::kF16:
        return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::kBF16:
        return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF8E4M3:
        return f8e4m3_to_f32(static_cast<const uint8_t*>(base)[i]);
    case DType::kI8:
        return static_cast<const int8_t*>(base)[i];
    case DType::kU8:
        return static_cast<const uint8_t*>(base)[i];
    case DType::kI32:
        return static_cast<const int32_t*>(base)[i];
    case DType::kI64:
        return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::kBool:
        return static_cast<const uint8_t*>(base)[i] ? 1.0 : 0.0;
    }
    return 0.0;
}

void store_from_f64(void* base, DType t, size_t i, double v) {
    switch (t) {
    case DType::kF32:
        static_cast<float*>(base)[i] = static_cast<float>(v);
        break;
    case DType::kF64:
        static_cast<double*>(base)[i] = v;
        break;
    case DType::kF16:
        static_cast<uint16_t*>(base)[i] = f32_to_f16(static_cast<float>(v));
        break;
    case DType::kBF16:
        static_cast<uint16_t*>(base)[i] = f32_to_bf16(static_cast<float>(v));
        break;
    case DType::kF8E4M3:
        static_cast<uint8_t*>(base)[i] = f32_to_f8e4m3(static_cast<float>(v));
        break;
    case DType::kI8:
        static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
        break;
    case DType::kU8:
        static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
        break;
    case DType::kI32:
        static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
        break;
    case DType::kI64:
        static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
        break;
    case DType::kBool:
        static_cast<uint8_t*>(base)[i] = v != 0.0 ? 1 : 0;
        break;
    }
}

void convert_array(const void* src, DType st, void* dst, DType dt, size_t n) {
    if (st == dt) {
        std::memcpy(dst, src, n * dtype_size(st));
        return;
    }
    // Fast paths for the common float conversions (exactness: f32 is the pivot; bf16/f16 -> f32 exact).
    if (dt == DType::kF32) {
        float* d = static_cast<float*>(dst);
        if (st == DType::kBF16) {
            const uint16_t* s = static_cast<const uint16_t*>(src);
            for (size_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
            return;
        }
        if (st == DType::kF16) {
            const uint16_t* s = static_cast<const uint16_t*>(src);
            for (size_t i = 0; i < n; ++i) d[i] = f16_to_f32(s[i]);
            return;
        }
    }
    if (st == DType::kF32) {
        const float* s = static_cast<const float*>(src);
        if (dt == DType::kBF16) {
            uint16_t* d = static_cast<uint16_t*>(dst);
            for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
            return;
        }
        if (dt == DType::kF16) {
            uint16_t* d = static_cast<uint16_t*>(dst);
            for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(s[i]);
            return;
        }
    }
    for (size_t i = 0; i < n; ++i) store_from_f64(dst, dt, i, load_as_f64(src, st, i));
}

} // namespace h3
