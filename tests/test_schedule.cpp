// Schedule grids, torch's CPU linspace and the Euler update, bit-exact against the torch 2.x numerics
// (tests/data/pipeline/{schedule,linspace}.safetensors from tools/reference/make_schedule_goldens.py, numpy;
// tools/reference/check_torch2_numerics.py checks them against torch 2.x itself).
#include "io/safetensors.h"
#include "pipeline/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace h3;
using namespace h3::pipeline;

namespace {
std::vector<float> golden(const io::SafetensorsFile& f, const std::string& n) {
    auto t = f.tensor(n);
    EXPECT_TRUE(t.ok()) << n;
    return t.ok() ? *to_f32_vector(*t) : std::vector<float>{};
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}
} // namespace

TEST(Schedule, SpecExamples) {
    auto d = make_dual_schedule(5);
    ASSERT_TRUE(d.ok());
    const float v[] = {1, 0.97297f, 0.92308f, 0.8f, 0}, a[] = {1, 0.9f, 0.75f, 0.5f, 0};
    ASSERT_EQ(d->video.sigmas.size(), 5u);
    for (int i = 0; i < 5; ++i) {
        EXPECT_NEAR(d->video.sigmas[i], v[i], 1e-5);
        EXPECT_NEAR(d->audio.sigmas[i], a[i], 1e-6);
    }
    EXPECT_EQ(d->forwards(), 4);
    EXPECT_EQ(d->video.timesteps[0], 0.0f); // step 0 of t2va has the single timestep 0
    auto n50 = make_schedule(50, 12);
    ASSERT_TRUE(n50.ok());
    EXPECT_EQ(n50->forwards(), 49);
    EXPECT_NEAR(n50->sigmas[48], 0.2f, 1e-6);
}

TEST(Schedule, GridsMatchTorchBitForBit) {
    auto f =
        io::SafetensorsFile::open(std::string(H3_SOURCE_DIR) + "/tests/data/pipeline/schedule.safetensors");
    ASSERT_TRUE(f.ok());
    int checked = 0;
    for (int n : {2, 3, 5, 9, 16, 17, 31, 32, 33, 50, 64, 100, 250}) {
        for (auto [shift, tag] : {std::pair{12.0, "video"}, std::pair{3.0, "audio"}}) {
            auto s = make_schedule(n, shift);
            ASSERT_TRUE(s.ok());
            const std::string suffix = std::string(tag) + "_N" + std::to_string(n);
            EXPECT_TRUE(same_bits(s->sigmas, golden(*f, "sigmas_" + suffix))) << suffix;
            EXPECT_TRUE(same_bits(s->timesteps, golden(*f, "timesteps_" + suffix))) << suffix;
            ++checked;
        }
    }
    for (int n = 2; n <= 64; ++n) {
        auto s = make_schedule(n, 12.0);
        EXPECT_TRUE(same_bits(s->sigmas, golden(*f, "sigmas_video_N" + std::to_string(n)))) << n;
    }
    EXPECT_EQ(checked, 26);
}

TEST(Schedule, LinspaceMatchesTorch2) {
    auto f =
        io::SafetensorsFile::open(std::string(H3_SOURCE_DIR) + "/tests/data/pipeline/linspace.safetensors");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const struct {
        const char* name;
        float start, end;
        int steps;
    } cases[] = {{"u1to0_n16", 1, 0, 16},   {"u1to0_n50", 1, 0, 50},   {"u1to0_n1000", 1, 0, 1000},
                 {"s0to47_n17", 0, 47, 17}, {"s0to47_n63", 0, 47, 63}, {"neg_n33", -3.25f, 7.5f, 33},
                 {"one", 2.5f, 9, 1},       {"two", 2.5f, 9, 2}};
    for (const auto& c : cases) {
        EXPECT_TRUE(same_bits(torch_linspace_f32(c.start, c.end, c.steps),
                              golden(*f, std::string("fused_") + c.name)))
            << c.name;
        EXPECT_TRUE(same_bits(torch_linspace_f32(c.start, c.end, c.steps, /*fused=*/false),
                              golden(*f, std::string("unfused_") + c.name)))
            << c.name;
    }
    EXPECT_TRUE(torch_linspace_f32(0, 1, 0).empty());
}

TEST(Schedule, LinspaceIsOneFmaPerElement) {
    // torch 2.x: every element on its own, fma(step, i, start) below the midpoint and fma(−step, n−1−i, end)
    // from it; the endpoints are exact. The unfused (DEFAULT-capability) build rounds the product first and
    // differs somewhere on this grid, so the two forms are told apart by the goldens above.
    const int n = 50;
    const auto t = torch_linspace_f32(1.0f, 0.0f, n);
    const auto u = torch_linspace_f32(1.0f, 0.0f, n, /*fused=*/false);
    const float step = -1.0f / 49.0f;
    int differ = 0;
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(t[i], i < n / 2 ? std::fma(step, static_cast<float>(i), 1.0f)
                                  : std::fma(-step, static_cast<float>(n - 1 - i), 0.0f))
            << i;
        differ += t[i] != u[i];
    }
    EXPECT_GT(differ, 0);
    EXPECT_EQ(t.front(), 1.0f);
    EXPECT_EQ(t.back(), 0.0f);
}

TEST(Schedule, EulerMatchesReference) {
    auto f =
        io::SafetensorsFile::open(std::string(H3_SOURCE_DIR) + "/tests/data/pipeline/schedule.safetensors");
    ASSERT_TRUE(f.ok());
    auto s = make_schedule(50, 12.0);
    const auto x = golden(*f, "euler_x"), v = golden(*f, "euler_v");
    for (int step : {7, 48}) {
        auto y = x;
        euler_update(y.data(), v.data(), y.size(), s->timesteps[step], s->sigmas[step], s->sigmas[step + 1]);
        EXPECT_TRUE(same_bits(y, golden(*f, "euler_out_step" + std::to_string(step)))) << step;
    }
    // The last step lands on x0 = x + (1 − t)·v (ratio 0).
    auto y = x;
    euler_update(y.data(), v.data(), y.size(), s->timesteps[48], s->sigmas[48], 0.0f);
    EXPECT_FLOAT_EQ(y[3], x[3] + (1.0f - s->timesteps[48]) * v[3]);
}

TEST(Schedule, RejectsBadRequests) {
    auto a = make_schedule(1, 12);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find("steps"), std::string::npos);
    EXPECT_NE(a.status().message().find("[2, "), std::string::npos);
    EXPECT_FALSE(make_schedule(10, 0).ok());
    EXPECT_FALSE(make_schedule(10, -3).ok());
}
