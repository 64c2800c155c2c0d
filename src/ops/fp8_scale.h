// The fp8 (e4m3) block scale shared by the CPU references and the CUDA kernels, so both quantize to the
// same bytes: a power of two, so that x / scale is exact and the only rounding is the one to e4m3.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define H3_HOST_DEVICE __host__ __device__
#else
#define H3_HOST_DEVICE
#endif

namespace h3::ops {

constexpr float kE4m3Max = 448.0f;

H3_HOST_DEVICE inline uint32_t fp8_float_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}
H3_HOST_DEVICE inline float fp8_bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

// The smallest power of two s with amax / s <= 448 (so the block's largest value lands in [224, 448]).
// amax = 0, NaN or below 2^-100 gives 1 (such a block quantizes to zeros).
H3_HOST_DEVICE inline float fp8_block_scale(float amax) {
    if (!(amax >= 7.888609052210118e-31f)) return 1.0f; // 2^-100
    const uint32_t bits = fp8_float_bits(amax);
    if (((bits >> 23) & 0xffu) == 0xffu) return 1.0f;            // inf
    const int e2 = static_cast<int>((bits >> 23) & 0xffu) - 127; // amax = m · 2^e2, m in [1, 2)
    const uint32_t mant = bits & 0x7fffffu;                      // m <= 1.75 <=> mant <= 0x600000
    const int e = e2 - 8 + (mant > 0x600000u ? 1 : 0);
    return fp8_bits_float(static_cast<uint32_t>(e + 127) << 23);
}

// log2 of a power of two (normal floats): its unbiased exponent.
H3_HOST_DEVICE inline int fp8_scale_log2(float pow2) {
    return static_cast<int>((fp8_float_bits(pow2) >> 23) & 0xffu) - 127;
}

// The fp8 attention's key order inside each 32-key group of the e4m3 Vᵀ copy: position p holds key
// fp8_attention_key_of(p). It matches the order in which a thread's e4m3 P fragment (built from the fp32
// score accumulators) feeds the P·V tensor-core product, so P needs no shuffles; the CPU reference sums
// in plain key order.
H3_HOST_DEVICE inline int fp8_attention_key_of(int p) {
    return (p & 16) + 2 * ((p & 15) >> 2) + (p & 1) + 8 * ((p >> 1) & 1);
}

#if !defined(__CUDA_ARCH__)
// x rounded to the nearest e4m3 value (ties to even), saturating to ±448 like cvt.rn.satfinite; the value
// as a float (the CPU references' fast path; tests check it against core's f32_to_f8e4m3).
inline float e4m3_round(float x) {
    const uint32_t bits = fp8_float_bits(x);
    const uint32_t sign = bits & 0x80000000u, mag = bits & 0x7fffffffu;
    if (mag > 0x7f800000u) return x;                                   // NaN
    if (mag >= 0x43e00000u) return fp8_bits_float(sign | 0x43e00000u); // |x| >= 448
    if (mag < 0x3c800000u) {                                           // |x| < 2^-6: subnormal, step 2^-9
        const float a = fp8_bits_float(mag) * 512.0f;                  // exact
        float r = static_cast<float>(static_cast<int>(a));
        const float frac = a - r;
        if (frac > 0.5f || (frac == 0.5f && (static_cast<int>(r) & 1))) r += 1.0f;
        return fp8_bits_float(sign | fp8_float_bits(r / 512.0f));
    }
    // normal: keep 3 mantissa bits, round to nearest even on the 20 dropped ones
    const uint32_t rounded = (mag + 0x7ffffu + ((mag >> 20) & 1u)) & ~0xfffffu;
    return fp8_bits_float(sign | rounded);
}
#endif

// fp8 attention tiling, part of the op's definition (the CPU reference quantizes the same blocks): q scales
// per 128 query rows per head, k and v scales per head, P = 2^(x − m + kFp8AttnPBias) quantized per
// 128-key block against the running row max.
constexpr int kFp8AttnBlockM = 128;
constexpr int kFp8AttnBlockN = 128;
constexpr int kFp8AttnPBias = 8;

} // namespace h3::ops
