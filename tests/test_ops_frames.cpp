// Op tests for sample_to_rgb8 (ops/frames.h), in the pattern of tests/test_ops.cpp. Default (CPU): the op
// against a per-value expectation written here (products and sums rounded once through exact double
// arithmetic, numpy's half-to-even rounding). With `--backend cuda` (or H3_TEST_BACKEND=cuda): the op on
// cuda:0 against the same expectation and against the CPU reference, byte for byte — on random samples
// (both kernels: a pixel count that is a multiple of 4 and one that is not, neither a multiple of the
// block), on hand-picked values at rounding ties (v·255 = k + 0.5), below 0 and above 1 after
// de-normalization, ±0, ±inf and NaN, and with other mean / stddev. Outputs are poisoned (two patterns)
// and guarded.
#include "op_harness.h"
#include "ops/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace h3::ops {
namespace {

using namespace harness;

// One value's byte, computed independently of the op: x·stddev and + mean each correctly rounded to fp32
// (the double product of two floats is exact; the double sum rounds to a float midpoint only where the
// float sum would tie, so rounding it again to float is correct), clamp (NaN -> 0), half to even.
uint8_t expected_byte(float s, float sd, float mn) {
    const float prod = static_cast<float>(static_cast<double>(s) * static_cast<double>(sd));
    float v = static_cast<float>(static_cast<double>(prod) + static_cast<double>(mn));
    if (!(v > 0.0f)) v = 0.0f;
    if (v > 1.0f) v = 1.0f;
    const float scaled = static_cast<float>(static_cast<double>(v) * 255.0);
    return static_cast<uint8_t>(std::nearbyint(scaled));
}

// frames [F, H, W, 3] expected from a host sample [3, F, H, W].
std::vector<uint8_t> expected_frames(const Tensor& sample, const SampleToRgb8Params& p) {
    const int64_t n = sample.dim(1) * sample.dim(2) * sample.dim(3);
    const float* s = sample.data_as<const float>();
    std::vector<uint8_t> out(static_cast<size_t>(n * 3));
    for (int64_t c = 0; c < 3; ++c)
        for (int64_t i = 0; i < n; ++i)
            out[static_cast<size_t>(i * 3 + c)] =
                expected_byte(s[c * n + i], p.stddev[static_cast<size_t>(c)], p.mean[static_cast<size_t>(c)]);
    return out;
}

std::vector<uint8_t> bytes_of(const Tensor& host) {
    const uint8_t* d = host.data_as<const uint8_t>();
    return {d, d + host.numel()};
}

// The op on the backend into a poisoned, guarded output; the frames back on the host.
std::vector<uint8_t> run_op(const Tensor& sample_host, const SampleToRgb8Params& p, uint8_t poison) {
    const Shape fs{sample_host.dim(1), sample_host.dim(2), sample_host.dim(3), 3};
    Tensor init = Tensor::host(fs, DType::kU8);
    std::memset(init.data(), poison, init.nbytes());
    Guarded out(init);
    const Tensor sample = dev(sample_host);
    Status st = sample_to_rgb8(ctx(), p, sample, out.t);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (on_cuda()) {
        EXPECT_TRUE(cuda::device_synchronize().ok());
    }
    EXPECT_TRUE(out.guards_intact()) << "sample_to_rgb8 wrote outside its output";
    return bytes_of(out.host());
}

// The op (both poisons) against the expectation; on CUDA also against the CPU reference.
void check_sample(const Tensor& sample, const SampleToRgb8Params& p, const std::string& what) {
    const std::vector<uint8_t> want = expected_frames(sample, p);
    std::vector<uint8_t> cpu_ref;
    if (on_cuda()) {
        Tensor frames = Tensor::host(Shape{sample.dim(1), sample.dim(2), sample.dim(3), 3}, DType::kU8);
        Status st = sample_to_rgb8(Context::cpu(), p, clone(sample), frames);
        ASSERT_TRUE(st.ok()) << st.to_string();
        cpu_ref = bytes_of(frames);
    }
    for (uint8_t poison : {uint8_t{0xA5}, uint8_t{0x5A}}) {
        const std::vector<uint8_t> got = run_op(sample, p, poison);
        ASSERT_EQ(got.size(), want.size()) << what;
        int bad = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            if (got[i] == want[i] && (cpu_ref.empty() || cpu_ref[i] == got[i])) continue;
            const int64_t n = sample.dim(1) * sample.dim(2) * sample.dim(3);
            const size_t px = i / 3, c = i % 3;
            if (bad++ < 8)
                ADD_FAILURE()
                    << what << " (poison " << int(poison) << "): pixel " << px << " channel " << c
                    << " sample "
                    << sample.data_as<const float>()[static_cast<int64_t>(c) * n + static_cast<int64_t>(px)]
                    << " got " << int(got[i]) << " want " << int(want[i])
                    << (cpu_ref.empty() ? "" : " cpu " + std::to_string(cpu_ref[i]));
        }
        EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " bytes differ";
    }
}

TEST(SampleToRgb8, RandomSamplesBothKernels) {
    SKIP_IF_NO_BACKEND();
    // [-3, 3]: de-normalized from about −0.27 to 1.08, both clamps reached in every channel
    struct Case {
        Shape shape;
        const char* what;
    };
    const Case cases[] = {
        {Shape{3, 5, 17, 24}, "2040 pixels (4 per thread)"}, // not a multiple of 256 or 1024
        {Shape{3, 3, 7, 11}, "231 pixels (1 per thread)"},   // odd
        {Shape{3, 2, 9, 2}, "36 pixels"},                    // less than a block
        {Shape{3, 1, 1, 1}, "1 pixel"},
        {Shape{3, 4, 130, 67}, "34840 pixels (4 per thread)"}, // many blocks
    };
    uint32_t seed = 11;
    for (const Case& c : cases) check_sample(rnd(c.shape, DType::kF32, seed++, -3.0f, 3.0f), {}, c.what);
    const SampleToRgb8Params other{.mean = {0.5f, 0.25f, 0.0f}, .stddev = {0.5f, 0.3f, 1.7f}};
    check_sample(rnd(Shape{3, 3, 8, 13}, DType::kF32, 99, -2.0f, 2.0f), other, "other mean / stddev");
}

// A frame range of a larger sample (its channel planes apart by the whole sample's stride): what a decode
// converts clip by clip; the bytes are those of the range made contiguous first. Ranges at the start, in
// the middle and at the end, of pixel counts the 4-per-thread kernel takes and of ones it does not.
TEST(SampleToRgb8, FrameRangeOfASample) {
    SKIP_IF_NO_BACKEND();
    for (const Shape& shape : {Shape{3, 7, 6, 8}, Shape{3, 5, 3, 5}}) {
        const Tensor whole_host = rnd(shape, DType::kF32, 5, -3.0f, 3.0f);
        const Tensor whole = dev(whole_host);
        for (const auto& [a, b] : {std::pair<int64_t, int64_t>{0, 2}, {2, 5}, {4, shape[1]}}) {
            const Tensor part = whole_host.slice(1, a, b);
            auto contiguous = part.contiguous();
            ASSERT_TRUE(contiguous.ok());
            const std::vector<uint8_t> want = expected_frames(*contiguous, {});
            Tensor init = Tensor::host(Shape{b - a, shape[2], shape[3], 3}, DType::kU8);
            std::memset(init.data(), 0xA5, init.nbytes());
            Guarded out(init);
            Status st = sample_to_rgb8(ctx(), {}, whole.slice(1, a, b), out.t);
            ASSERT_TRUE(st.ok()) << st.to_string();
            if (on_cuda()) {
                ASSERT_TRUE(cuda::device_synchronize().ok());
            }
            EXPECT_TRUE(out.guards_intact());
            EXPECT_EQ(bytes_of(out.host()), want) << shape.to_string() << " frames " << a << ".." << b;
        }
    }
}

// Samples whose x·std + mean lands exactly on (k + 0.5) / 255 after de-normalization (found by searching
// around the target, as tests/test_vae.cpp does), plus values clamped below 0 and above 1, the exact ends,
// signed zeros, infinities and NaN.
TEST(SampleToRgb8, TiesClampsAndSpecialValues) {
    SKIP_IF_NO_BACKEND();
    const SampleToRgb8Params p;
    std::vector<float> vals[3];
    int ties = 0, even_ties = 0;
    for (int ch = 0; ch < 3; ++ch) {
        const float sd = p.stddev[static_cast<size_t>(ch)], mn = p.mean[static_cast<size_t>(ch)];
        for (int k = 0; k < 255; ++k) {
            const float target = (static_cast<float>(k) + 0.5f) / 255.0f;
            float s = (target - mn) / sd;
            for (int step = 0; step < 64; ++step) s = std::nextafter(s, -100.0f);
            for (int step = 0; step < 128; ++step, s = std::nextafter(s, 100.0f)) {
                const float prod = static_cast<float>(static_cast<double>(s) * sd);
                const float v = static_cast<float>(static_cast<double>(prod) + mn);
                // v·255 rounded in fp32 is the midpoint (no float v is exactly (k + 0.5) / 255)
                if (v >= 0.0f && v <= 1.0f &&
                    static_cast<float>(static_cast<double>(v) * 255.0) == static_cast<float>(k) + 0.5f) {
                    EXPECT_EQ(expected_byte(s, sd, mn), k % 2 == 0 ? k : k + 1)
                        << "numpy rounds half to even";
                    vals[ch].push_back(s);
                    ++ties;
                    even_ties += k % 2 == 0;
                    // and its neighbours, which must round away from the tie both ways
                    vals[ch].push_back(std::nextafter(s, -100.0f));
                    vals[ch].push_back(std::nextafter(s, 100.0f));
                    break;
                }
            }
        }
        const float inf = std::numeric_limits<float>::infinity();
        // −mean/std and (1 − mean)/std: de-normalized near 0 and 1; far below and above; specials
        const float lo = -mn / sd, hi = (1.0f - mn) / sd;
        for (float s :
             {lo, std::nextafter(lo, -100.0f), std::nextafter(lo, 100.0f), hi, std::nextafter(hi, -100.0f),
              std::nextafter(hi, 100.0f), -5.0f, 5.0f, -1e30f, 1e30f, 0.0f, -0.0f, inf, -inf,
              std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()})
            vals[ch].push_back(s);
    }
    ASSERT_GT(ties, 100) << "too few exact ties found";
    ASSERT_GT(even_ties, 40) << "too few ties at even k";
    size_t n = std::max({vals[0].size(), vals[1].size(), vals[2].size()});
    if (n % 4 == 0) ++n; // the one-pixel-per-thread kernel first
    for (size_t total : {n, (n + 3) / 4 * 4}) {
        Tensor sample = Tensor::host(Shape{3, 1, 1, static_cast<int64_t>(total)}, DType::kF32);
        for (int ch = 0; ch < 3; ++ch)
            for (size_t i = 0; i < total; ++i)
                sample.data_as<float>()[static_cast<size_t>(ch) * total + i] =
                    vals[ch][i % vals[ch].size()]; // shorter channels repeat their list
        check_sample(sample, p, std::to_string(total) + " hand-picked pixels");
    }
}

TEST(SampleToRgb8, RejectsBadArguments) {
    const Context cpu = Context::cpu();
    const Tensor sample = Tensor::host(Shape{3, 2, 4, 5}, DType::kF32);
    Tensor frames = Tensor::host(Shape{2, 4, 5, 3}, DType::kU8);
    EXPECT_TRUE(sample_to_rgb8(cpu, {}, sample, frames).ok());
    auto expect_error = [](const Status& s, const std::string& part) {
        EXPECT_FALSE(s.ok());
        EXPECT_NE(s.to_string().find(part), std::string::npos) << s.to_string();
    };
    Tensor f16_sample = Tensor::host(Shape{3, 2, 4, 5}, DType::kF16);
    expect_error(sample_to_rgb8(cpu, {}, f16_sample, frames), "expected f32[3, F, H, W]");
    Tensor four = Tensor::host(Shape{4, 2, 4, 5}, DType::kF32);
    expect_error(sample_to_rgb8(cpu, {}, four, frames), "expected f32[3, F, H, W]");
    Tensor wrong = Tensor::host(Shape{2, 5, 4, 3}, DType::kU8);
    expect_error(sample_to_rgb8(cpu, {}, sample, wrong), "expected shape [2, 4, 5, 3]");
    Tensor f32_frames = Tensor::host(Shape{2, 4, 5, 3}, DType::kF32);
    expect_error(sample_to_rgb8(cpu, {}, sample, f32_frames), "expected u8");
    const Tensor big = Tensor::host(Shape{3, 2, 4, 10}, DType::kF32);
    expect_error(sample_to_rgb8(cpu, {}, big.slice(3, 0, 5), frames), "must be contiguous");
    const Tensor tall = Tensor::host(Shape{3, 2, 8, 5}, DType::kF32); // a row range is not a frame range
    expect_error(sample_to_rgb8(cpu, {}, tall.slice(2, 0, 4), frames), "frame range");
    SampleToRgb8Params nan;
    nan.stddev[1] = std::numeric_limits<float>::quiet_NaN();
    expect_error(sample_to_rgb8(cpu, nan, sample, frames), "channel 1");
}

} // namespace
} // namespace h3::ops
