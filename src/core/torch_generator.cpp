#include "core/torch_generator.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace h3 {

namespace {

constexpr double kPi = 3.14159265358979323846;

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// One lane of avx_mathfun's log256_ps. Every multiply feeding an add is an FMA where GCC contracts it
// (the AVX2 kernels are built with -mfma and the default -ffp-contract=fast); the others round.
float cephes_logf(float x) {
    x = std::fmax(x, float_of(0x00800000u)); // cut off denormals
    int32_t imm0 = static_cast<int32_t>(bits_of(x) >> 23);
    x = float_of((bits_of(x) & ~0x7f800000u) | bits_of(0.5f));
    imm0 -= 0x7f;
    float e = static_cast<float>(imm0);
    e = e + 1.0f;
    const bool mask = x < 0.707106781186547524f;
    const float tmp = mask ? x : 0.0f;
    x = x - 1.0f;
    e = e - (mask ? 1.0f : 0.0f);
    x = x + tmp;
    const float z = x * x;
    float y = std::fma(7.0376836292E-2f, x, -1.1514610310E-1f);
    y = std::fma(y, x, 1.1676998740E-1f);
    y = std::fma(y, x, -1.2420140846E-1f);
    y = std::fma(y, x, 1.4249322787E-1f);
    y = std::fma(y, x, -1.6668057665E-1f);
    y = std::fma(y, x, 2.0000714765E-1f);
    y = std::fma(y, x, -2.4999993993E-1f);
    y = std::fma(y, x, 3.3333331174E-1f);
    y = y * x;
    y = std::fma(y, z, e * -2.12194440e-4f);
    y = y - z * 0.5f; // z·0.5 is exact, so the fused and unfused forms agree
    x = x + y;
    return std::fma(e, 0.693359375f, x);
}

// One lane of avx_mathfun's sincos256_ps (Cephes sinf/cosf with the same contractions as above).
void cephes_sincosf(float xin, float* s, float* c) {
    uint32_t sign_sin = bits_of(xin) & 0x80000000u;
    float x = std::fabs(xin);
    float y = x * 1.27323954473516f;     // 4/π
    int32_t j = static_cast<int32_t>(y); // truncation, like cvttps
    j = (j + 1) & ~1;
    y = static_cast<float>(j);
    const uint32_t swap_sign_sin = static_cast<uint32_t>(j & 4) << 29;
    const bool poly = (j & 2) == 0;
    x = std::fma(y, -0.78515625f, x);
    x = std::fma(y, -2.4187564849853515625e-4f, x);
    x = std::fma(y, -3.77489497744594108e-8f, x);
    const uint32_t sign_cos = static_cast<uint32_t>(~(j - 2) & 4) << 29;
    sign_sin ^= swap_sign_sin;
    const float z = x * x;
    float yc = std::fma(2.443315711809948E-005f, z, -1.388731625493765E-003f);
    yc = std::fma(yc, z, 4.166664568298827E-002f);
    yc = yc * z;
    yc = std::fma(yc, z, -(z * 0.5f));
    yc = yc + 1.0f;
    float ys = std::fma(-1.9515295891E-4f, z, 8.3321608736E-3f);
    ys = std::fma(ys, z, -1.6666654611E-1f);
    ys = ys * z;
    ys = std::fma(ys, x, x);
    const float sin_v = poly ? ys : yc;
    const float cos_v = poly ? yc : ys;
    *s = float_of(bits_of(sin_v) ^ sign_sin);
    *c = float_of(bits_of(cos_v) ^ sign_cos);
}

} // namespace

TorchGenerator::TorchGenerator(uint64_t seed, TorchNormalKernel kernel) : kernel_(kernel) {
    manual_seed(seed);
}

void TorchGenerator::manual_seed(uint64_t seed) {
    seed_ = seed;
    engine_.seed(static_cast<uint32_t>(seed & 0xffffffffu));
    next_double_normal_.reset();
}

uint64_t TorchGenerator::random64() {
    const uint64_t hi = engine_();
    const uint64_t lo = engine_();
    return (hi << 32) | lo;
}

float TorchGenerator::uniform_float() {
    return static_cast<float>(engine_() & ((1u << 24) - 1)) * (1.0f / static_cast<float>(1u << 24));
}

double TorchGenerator::uniform_double() {
    return static_cast<double>(random64() & ((1ull << 53) - 1)) * (1.0 / static_cast<double>(1ull << 53));
}

double TorchGenerator::normal_double() {
    if (next_double_normal_) {
        const double v = *next_double_normal_;
        next_double_normal_.reset();
        return v;
    }
    const double u1 = uniform_double();
    const double u2 = uniform_double();
    const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
    const double theta = 2.0 * kPi * u1;
    next_double_normal_ = r * std::sin(theta);
    return r * std::cos(theta);
}

void TorchGenerator::normal_fill_16(float* data) const {
    if (kernel_ == TorchNormalKernel::kAvx2) {
        const float two_pi = static_cast<float>(2.0 * kPi);
        for (int j = 0; j < 8; ++j) {
            const float u1 = 1.0f - data[j];
            const float u2 = data[j + 8];
            const float radius = std::sqrt(-2.0f * cephes_logf(u1));
            const float theta = two_pi * u2;
            float s, c;
            cephes_sincosf(theta, &s, &c);
            data[j] = radius * c;
            data[j + 8] = radius * s;
        }
        return;
    }
    for (int j = 0; j < 8; ++j) {
        const float u1 = 1.0f - data[j];
        const float u2 = data[j + 8];
        const float radius = std::sqrt(-2.0f * std::log(u1));
        const float theta = static_cast<float>(2.0 * kPi * static_cast<double>(u2));
        data[j] = radius * std::cos(theta);
        data[j + 8] = radius * std::sin(theta);
    }
}

void TorchGenerator::randn(float* out, size_t n) {
    if (n < 16) {
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(normal_double());
        return;
    }
    for (size_t i = 0; i < n; ++i) out[i] = uniform_float();
    // The draws are one sequence; the transform of each 16 is independent of the others, so it runs in
    // parallel (a 1344x768x124 request draws ~3.6 M values).
    const auto chunks = static_cast<int64_t>(n / 16);
#pragma omp parallel for schedule(static) if (chunks >= 4096)
    for (int64_t c = 0; c < chunks; ++c) normal_fill_16(out + c * 16);
    if (n % 16 != 0) {
        float* tail = out + n - 16; // torch redraws and re-transforms the last 16 values
        for (int i = 0; i < 16; ++i) tail[i] = uniform_float();
        normal_fill_16(tail);
    }
}

} // namespace h3
