// `bench quality`'s measurements on known inputs (bench/quality/table.h over pipeline/quality_metrics.h):
// identical runs give PSNR and SNR +inf, SSIM and cosine 1; a constant pixel offset gives the exact PSNR;
// a scaled waveform the exact SNR; cases sum by pixels and samples; the speedups are the reference's
// counts over the setting's; the markdown's shape; the setting and case names.
#include "bench/quality/settings.h"
#include "bench/quality/table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace h3::bench {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor frames(int n, int h, int w, int base) {
    Tensor t = Tensor::host(Shape{n, h, w, 3}, DType::kU8);
    uint8_t* p = t.data_as<uint8_t>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(base + (i * 7) % 100);
    return t;
}

Tensor wave(int64_t n, float scale) {
    Tensor t = Tensor::host(Shape{2, n}, DType::kF32);
    float* p = t.data_as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = scale * std::sin(0.01f * static_cast<float>(i));
    return t;
}

CaseRun run(std::string name, Tensor f, Tensor a, int64_t blocks, double denoise) {
    CaseRun r;
    r.name = std::move(name);
    r.frames = std::move(f);
    r.audio = std::move(a);
    r.blocks = blocks;
    r.step_seconds = denoise;
    return r;
}

TEST(QualityBench, IdenticalRunsAreExact) {
    const CaseRun ref = run("ball", frames(3, 16, 12, 20), wave(500, 0.5f), 18, 2.0);
    auto c = compare_case(ref, ref);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->psnr, kInf);
    EXPECT_EQ(c->psnr_min, kInf);
    EXPECT_EQ(c->ssim_mean, 1.0);
    EXPECT_EQ(c->ssim_min, 1.0);
    EXPECT_EQ(c->identical_frames, 3);
    EXPECT_EQ(c->audio.snr_db, kInf);
    EXPECT_NEAR(c->audio.cosine, 1.0, 1e-15);
    QualityRow row = measured_row("lossless", "reference", "--quality lossless", {*c}, 18, 2.0);
    EXPECT_EQ(row.psnr, kInf);
    EXPECT_EQ(row.audio.snr_db, kInf);
    EXPECT_EQ(row.work_speedup, 1.0);
    EXPECT_EQ(row.wall_speedup, 1.0);
}

TEST(QualityBench, KnownOffsetAndScaleGiveTheExactFigures) {
    const CaseRun ref = run("ball", frames(2, 16, 12, 20), wave(400, 0.5f), 18, 2.0);
    // every value +10: MSE 100 → PSNR 20·log10(255/10); the waveform halved: SNR 10·log10(ΣA²/Σ(A/2)²) =
    // 10·log10 4
    Tensor shifted = frames(2, 16, 12, 30);
    const CaseRun b = run("ball", shifted, wave(400, 0.25f), 12, 1.0);
    auto c = compare_case(ref, b);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_NEAR(c->psnr, 20.0 * std::log10(25.5), 1e-12);
    EXPECT_NEAR(c->psnr_min, 20.0 * std::log10(25.5), 1e-12);
    EXPECT_EQ(c->identical_frames, 0);
    EXPECT_LT(c->ssim_mean, 1.0);
    EXPECT_NEAR(c->audio.snr_db, 10.0 * std::log10(4.0), 1e-9);
    EXPECT_NEAR(c->audio.cosine, 1.0, 1e-12);

    // Two cases: one identical, one with MSE 100 over as many values → the row's MSE is 50.
    auto same = compare_case(ref, ref);
    ASSERT_TRUE(same.ok());
    QualityRow row = measured_row("x", "cache", "--cache x", {*same, *c}, 36, 4.0);
    EXPECT_NEAR(row.psnr, 10.0 * std::log10(255.0 * 255.0 / 50.0), 1e-12);
    EXPECT_NEAR(row.psnr_min, 20.0 * std::log10(25.5), 1e-12);
    EXPECT_EQ(row.frames, 4);
    EXPECT_EQ(row.identical_frames, 2);
    EXPECT_NEAR(row.ssim_mean, (2.0 + 2.0 * c->ssim_mean) / 4.0, 1e-12);
    // audio over both cases: Σ(A−B)² is the second case's alone, ΣA² both cases'
    EXPECT_NEAR(row.audio.snr_db, 10.0 * std::log10(8.0), 1e-9);
    EXPECT_EQ(row.blocks, 30);
    EXPECT_NEAR(row.work_speedup, 36.0 / 30.0, 1e-15);
    EXPECT_NEAR(row.wall_speedup, 4.0 / 3.0, 1e-15);
}

TEST(QualityBench, ShapeMismatchIsAnError) {
    const CaseRun ref = run("ball", frames(2, 16, 12, 20), wave(400, 0.5f), 18, 2.0);
    const CaseRun fewer = run("ball", frames(1, 16, 12, 20), wave(400, 0.5f), 18, 2.0);
    auto c = compare_case(ref, fewer);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("case 'ball'"), std::string::npos) << c.status().to_string();
    const CaseRun shorter = run("ball", frames(2, 16, 12, 20), wave(300, 0.5f), 18, 2.0);
    EXPECT_FALSE(compare_case(ref, shorter).ok());
}

TEST(QualityBench, MarkdownTable) {
    const CaseRun ref = run("ball", frames(2, 16, 12, 20), wave(400, 0.5f), 18, 2.0);
    auto same = compare_case(ref, ref);
    ASSERT_TRUE(same.ok());
    QualityHeader h{.model = "m",
                    .tiny = true,
                    .device = "cpu",
                    .dtype = "fp32",
                    .geometry = "g",
                    .schedule = "s",
                    .cases = {"ball (t2va, seed 1): x"},
                    .reference_blocks = 18};
    std::vector<QualityRow> rows = {
        measured_row("lossless", "reference", "--quality lossless", {*same}, 18, 2.0)};
    QualityRow na;
    na.name = "dbcache-defaults";
    na.flags = "--cache dbcache";
    na.status = RowStatus::kNotApplicable;
    na.reason = "too few blocks";
    rows.push_back(na);
    const std::string md = quality_markdown(h, rows);
    EXPECT_NE(md.find("| setting | flags | PSNR dB |"), std::string::npos) << md;
    EXPECT_NE(md.find("|---|---|---|---|---|---|---|---|---|---|---|---|\n"), std::string::npos) << md;
    EXPECT_NE(
        md.find("| lossless | `--quality lossless` | inf | inf | 1.0000 | 1.0000 | inf | 1.000000 | 18 | "
                "1.000 |"),
        std::string::npos)
        << md;
    EXPECT_NE(md.find("| dbcache-defaults | `--cache dbcache` | — |"), std::string::npos) << md;
    EXPECT_NE(md.find("- dbcache-defaults: not_applicable: too few blocks"), std::string::npos) << md;
    EXPECT_NE(md.find("say nothing about quality"), std::string::npos) << md;
    const auto j = quality_json(h, rows);
    EXPECT_EQ(j["settings"][0]["video"]["psnr_db"], "inf");
    EXPECT_EQ(j["settings"][1]["status"], "not_applicable");
    EXPECT_FALSE(j["settings"][1].contains("video"));
}

TEST(QualityBench, SettingsAndCases) {
    const auto& all = all_quality_settings();
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(all.front().name, "lossless");
    for (const char* name : {"high", "int8", "bf16", "fp16", "fp8", "teacache", "velocity", "vsa-0.9"}) {
        auto one = select_quality_settings(name);
        ASSERT_TRUE(one.ok()) << name;
        ASSERT_EQ(one->size(), 1u) << name;
        EXPECT_FALSE(one->front().flags.empty()) << name;
    }
    auto two = select_quality_settings("int8,lossless"); // table order kept
    ASSERT_TRUE(two.ok());
    ASSERT_EQ(two->size(), 2u);
    EXPECT_EQ((*two)[0].name, "lossless");
    EXPECT_EQ(select_quality_settings("all")->size(), all.size());
    auto bad = select_quality_settings("high,ultra");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("--settings: unknown name 'ultra'"), std::string::npos);
    EXPECT_EQ(select_quality_cases("keyframe")->front().task, "fl2va");
    EXPECT_FALSE(select_quality_cases("nope").ok());
    const io::DecodedImage k = quality_keyframe(64, 32);
    EXPECT_EQ(k.image.width, 64);
    EXPECT_EQ(k.image.height, 32);
    EXPECT_EQ(k.image.pixels.size(), 64u * 32u * 3u);
}

} // namespace
} // namespace h3::bench
