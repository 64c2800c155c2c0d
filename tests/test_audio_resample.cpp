// The torchaudio sinc resampler (pipeline/audio_resample) against goldens from
// tools/reference/audio_resample_reference.py (torch 1.13 CPU running torchaudio's kernel and convolution
// steps): 44100, 48000, 16000 and 22050 Hz → 32000 Hz, both kernel precisions (transforms.Resample and
// functional.resample). Tolerance: max |Δ| < 1e-6 on signals in [−1, 1] — the kernel is reproduced in torch's
// own op order and precision, and the remaining difference is torch's fp32 convolution against our double
// accumulation (≲ 2e-7, tests/data/audio_resample/conv_error.json); the two kernel precisions differ by up to
// 1.7e-5, so the test tells them apart.
#include "io/safetensors.h"
#include "pipeline/audio_resample.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

using namespace h3;
using namespace h3::pipeline;

namespace {

const io::SafetensorsFile& goldens() {
    static io::SafetensorsFile f = [] {
        auto r = io::SafetensorsFile::open(std::string(H3_SOURCE_DIR) +
                                           "/tests/data/audio_resample/goldens.safetensors");
        EXPECT_TRUE(r.ok()) << r.status().to_string();
        return std::move(r).value();
    }();
    return f;
}

Tensor golden(const std::string& name) {
    auto t = goldens().tensor(name);
    EXPECT_TRUE(t.ok()) << name << ": " << t.status().to_string();
    return t->to_dtype(DType::kF32).value(); // a writable host copy
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    const auto va = to_f32_vector(a).value(), vb = to_f32_vector(b).value();
    double m = 0.0;
    for (size_t i = 0; i < std::min(va.size(), vb.size()); ++i) {
        const double d = std::fabs(double(va[i]) - vb[i]);
        m = std::max(m, std::isfinite(d) ? d : INFINITY);
    }
    return m;
}

constexpr int kRates[] = {44100, 48000, 16000, 22050};

TEST(AudioResample, MatchesTorchaudioGoldens) {
    for (int rate : kRates) {
        const std::string r = std::to_string(rate);
        const Tensor in = golden("in_" + r);
        for (const auto& [kind, name] : {std::pair{ResampleKernel::kTransform, "transform"},
                                         std::pair{ResampleKernel::kFunctional, "functional"}}) {
            auto out = resample_audio(in, rate, 32000, {.kernel = kind});
            ASSERT_TRUE(out.ok()) << out.status().to_string();
            const Tensor want = golden(std::string(name) + "_" + r);
            ASSERT_EQ(out->shape(), want.shape()) << name << " " << r;
            const double d = max_abs_diff(*out, want);
            EXPECT_LT(d, 1e-6) << name << " " << r << " Hz";
            std::printf("%s %d -> 32000: max |got - golden| = %.3g\n", name, rate, d);
        }
    }
}

// The two torchaudio entry points build different kernels; the goldens of one must not pass for the other
// where the rates need a long kernel (44.1 and 22.05 kHz).
TEST(AudioResample, KernelPrecisionMatters) {
    for (int rate : {44100, 22050}) {
        const std::string r = std::to_string(rate);
        auto t = resample_audio(golden("in_" + r), rate, 32000, {.kernel = ResampleKernel::kTransform});
        ASSERT_TRUE(t.ok());
        EXPECT_GT(max_abs_diff(*t, golden("functional_" + r)), 2e-6) << r;
    }
}

// The transform's kernel (float64 math, float32 storage) is torch's to the bit but for the last rounding of
// a double sin/cos (glibc vs SLEEF, ≤ 1 ulp of a double): at most one float32 ulp.
TEST(AudioResample, KernelMatchesTorch) {
    for (int rate : {48000, 16000}) {
        auto k = sinc_resample_kernel(rate, 32000);
        ASSERT_TRUE(k.ok()) << k.status().to_string();
        const Tensor want = golden("kernel_" + std::to_string(rate));
        ASSERT_EQ(want.dim(0), k->next);
        ASSERT_EQ(want.dim(1), k->taps);
        const float* w = want.data_as<const float>();
        int exact = 0;
        for (size_t i = 0; i < k->values.size(); ++i) {
            EXPECT_LE(std::fabs(k->values[i] - w[i]), std::fabs(w[i]) * 1.2e-7f + 1e-30f) << rate << " " << i;
            exact += k->values[i] == w[i];
        }
        std::printf("kernel %d -> 32000: %d of %zu values bit-identical\n", rate, exact, k->values.size());
    }
    // 44100 -> 32000, phases 0, 1, 160, 319 of both precisions. The float32 kernel's sin/cos are glibc's
    // sinf/cosf here and SLEEF's vectorized ones in torch (both within 1 ulp of the true value), so a value
    // may sit one float32 ulp of its intermediate away: allowed 4 ulp of the value, or 2e-9 absolute near
    // zero.
    for (const auto& [kind, name] :
         {std::pair{ResampleKernel::kTransform, "kernel_rows_44100"},
          std::pair{ResampleKernel::kFunctional, "kernel_rows_44100_functional"}}) {
        auto kr = sinc_resample_kernel(44100, 32000, {.kernel = kind});
        ASSERT_TRUE(kr.ok());
        const Tensor want = golden(name);
        ASSERT_EQ(want.shape(), (Shape{4, kr->taps}));
        const bool f64 = kind == ResampleKernel::kTransform;
        int exact = 0;
        double worst = 0.0;
        const int64_t rows[] = {0, 1, 160, 319};
        for (int r = 0; r < 4; ++r)
            for (int64_t i = 0; i < kr->taps; ++i) {
                const float g = kr->values[size_t(rows[r] * kr->taps + i)],
                            w = want.data_as<const float>()[r * kr->taps + i];
                const float tol = f64 ? std::fabs(w) * 1.2e-7f + 1e-30f : std::fabs(w) * 4.8e-7f + 2e-9f;
                EXPECT_LE(std::fabs(g - w), tol) << name << " phase " << rows[r] << " tap " << i;
                exact += g == w;
                worst = std::max(worst, double(std::fabs(g - w)));
            }
        std::printf("%s: %d of %lld values bit-identical, max |diff| %.3g\n", name, exact,
                    static_cast<long long>(4 * kr->taps), worst);
    }
    // 44100 -> 32000: gcd 100, 441/320, width ceil(6·441/316.8) = 9, 2·9 + 441 taps.
    auto k = sinc_resample_kernel(44100, 32000);
    ASSERT_TRUE(k.ok());
    EXPECT_EQ(k->orig, 441);
    EXPECT_EQ(k->next, 320);
    EXPECT_EQ(k->width, 9);
    EXPECT_EQ(k->taps, 459);
}

TEST(AudioResample, LengthFormulaAndIdentity) {
    for (int orig : {44100, 48000, 16000, 22050, 8000, 11025, 96000}) {
        for (int64_t n : {0, 1, 2, 7, 441, 1000, 4801}) {
            Tensor x = Tensor::host(Shape{1, n}, DType::kF32);
            for (int64_t i = 0; i < n; ++i) x.data_as<float>()[i] = std::sin(0.01f * float(i));
            auto y = resample_audio(x, orig, 32000);
            ASSERT_TRUE(y.ok()) << y.status().to_string();
            const int64_t want = static_cast<int64_t>(std::ceil(32000.0 * double(n) / orig));
            EXPECT_EQ(y->shape(), (Shape{1, want})) << orig << " Hz, " << n << " samples";
        }
    }
    const Tensor in = golden("in_48000");
    auto same = resample_audio(in, 32000, 32000);
    ASSERT_TRUE(same.ok());
    EXPECT_EQ(max_abs_diff(*same, in), 0.0);
    EXPECT_NE(same->data(), in.data()) << "a copy, not a view";
}

// Golden-independent: a 1 kHz tone resampled 48 kHz → 32 kHz is the same tone sampled at 32 kHz (away from
// the zero-padded ends), so the phase interleaving and the time origin are right.
TEST(AudioResample, ToneKeepsItsPhase) {
    for (int orig : {48000, 44100, 16000}) {
        const int64_t n = orig / 10;
        Tensor x = Tensor::host(Shape{1, n}, DType::kF32);
        for (int64_t i = 0; i < n; ++i)
            x.data_as<float>()[i] = static_cast<float>(0.5 * std::sin(2 * M_PI * 1000.0 * double(i) / orig));
        auto y = resample_audio(x, orig, 32000);
        ASSERT_TRUE(y.ok());
        double worst = 0.0;
        for (int64_t m = 400; m < y->dim(1) - 400; ++m)
            worst = std::max(worst, std::fabs(y->data_as<const float>()[m] -
                                              0.5 * std::sin(2 * M_PI * 1000.0 * double(m) / 32000.0)));
        EXPECT_LT(worst, 5e-3) << orig;
    }
}

TEST(AudioResample, RejectsBadInput) {
    Tensor x = Tensor::host(Shape{2, 16}, DType::kF32);
    auto r = resample_audio(x, 0, 32000);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("original sample rate 0 Hz"), std::string::npos)
        << r.status().to_string();
    r = resample_audio(x, 44100, -5);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("target sample rate -5 Hz"), std::string::npos)
        << r.status().to_string();
    r = resample_audio(x, 16000, 0);
    EXPECT_FALSE(r.ok());
    r = resample_audio(Tensor::host(Shape{16}, DType::kF32), 44100, 32000);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("[channels >= 1, samples]"), std::string::npos)
        << r.status().to_string();
    r = resample_audio(Tensor::host(Shape{2, 16}, DType::kF16), 44100, 32000);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("f32"), std::string::npos);
    // 44101 and 32000 are coprime: 32000 phases of 44119 taps would be 1.4e9 values.
    r = resample_audio(x, 44101, 32000);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("44101 Hz -> 32000 Hz"), std::string::npos) << r.status().to_string();
}

} // namespace
