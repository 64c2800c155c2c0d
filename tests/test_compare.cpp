// `compare`: PSNR/SSIM on hand-computed cases and against the numpy golden (tools/reference/
// quality_reference.py, checked there against skimage), audio statistics by hand and against the golden,
// the pairing rules (mismatches, common prefixes, warnings), the JSON rendering, latents, and the media
// reader on an MP4 written by write_mp4.
#include "io/json_file.h"
#include "io/media_reader.h"
#include "io/media_writer.h"
#include "io/safetensors.h"
#include "pipeline/compare.h"
#include "pipeline/compare_report.h"
#include "pipeline/quality_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace h3::pipeline {
namespace {

namespace fs = std::filesystem;
constexpr double kInf = std::numeric_limits<double>::infinity();

fs::path out_dir() {
    fs::path p = fs::path(H3_BINARY_DIR) / "test_compare";
    fs::create_directories(p);
    return p;
}

// The synthetic pairs of tools/reference/quality_reference.py (integer formulas, same in both).
std::pair<Tensor, Tensor> video_pair(const std::string& which, int frames, int h, int w) {
    Tensor a = Tensor::host(Shape{frames, h, w, 3}, DType::kU8),
           b = Tensor::host(Shape{frames, h, w, 3}, DType::kU8);
    for (int f = 0; f < frames; ++f)
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x)
                for (int c = 0; c < 3; ++c) {
                    int va = 0, vb = 0;
                    if (which == "offset_noise") {
                        va = (x * x + 3 * x * y + 7 * y + 50 * c + 13 * f) % 256;
                        vb = std::clamp(va + (x * 5 + y * 11 + c * 3 + f * 7) % 17 - 8, 0, 255);
                    } else if (which == "smooth_noise") {
                        va = (x * 4 + y * 6 + 40 * c + f * 5) % 256;
                        vb = std::clamp(va + (x * 7 + y * 13 + c * 5 + f * 3) % 29 - 14, 0, 255);
                    } else {
                        va = (x * 31 + y * 17 + c * 101 + ((x * y * 7) % 23) * 5 + f * 3) % 256;
                        vb = 255 - va;
                    }
                    const int64_t i = ((static_cast<int64_t>(f) * h + y) * w + x) * 3 + c;
                    a.data_as<uint8_t>()[i] = static_cast<uint8_t>(va);
                    b.data_as<uint8_t>()[i] = static_cast<uint8_t>(vb);
                }
    return {a, b};
}

std::pair<Tensor, Tensor> audio_pair(int channels, int64_t n) {
    Tensor a = Tensor::host(Shape{channels, n}, DType::kF32),
           b = Tensor::host(Shape{channels, n}, DType::kF32);
    for (int c = 0; c < channels; ++c)
        for (int64_t i = 0; i < n; ++i) {
            const double va = static_cast<double>((i * 37 + c * 11) % 101 - 50) / 64.0;
            a.data_as<float>()[c * n + i] = static_cast<float>(va);
            b.data_as<float>()[c * n + i] =
                static_cast<float>(va * 0.75 + static_cast<double>((i * 13 + c * 5) % 7 - 3) / 256.0);
        }
    return {a, b};
}

Tensor constant_frames(int frames, int h, int w, uint8_t v) {
    Tensor t = Tensor::host(Shape{frames, h, w, 3}, DType::kU8);
    std::fill_n(t.data_as<uint8_t>(), t.numel(), v);
    return t;
}

nlohmann::json golden() {
    auto j = io::read_json_file(std::string(H3_SOURCE_DIR) + "/tests/data/compare/quality_golden.json");
    EXPECT_TRUE(j.ok()) << j.status().to_string();
    return j.ok() ? *j : nlohmann::json();
}

TEST(QualityMetrics, PsnrHandComputed) {
    Tensor a = constant_frames(1, 16, 16, 100), b = constant_frames(1, 16, 16, 110);
    const int64_t n = a.numel();
    EXPECT_EQ(mse_u8(a.data_as<uint8_t>(), a.data_as<uint8_t>(), n), 0.0);
    EXPECT_EQ(psnr_from_mse(0.0), kInf);
    EXPECT_DOUBLE_EQ(mse_u8(a.data_as<uint8_t>(), b.data_as<uint8_t>(), n), 100.0);
    EXPECT_NEAR(psnr_from_mse(100.0), 20.0 * std::log10(25.5), 1e-12); // 28.1308 dB
    // one value off by 255 among n: MSE = 255²/n → PSNR = 10·log10(n)
    Tensor c = constant_frames(1, 16, 16, 0), d = constant_frames(1, 16, 16, 0);
    d.data_as<uint8_t>()[77] = 255;
    EXPECT_NEAR(psnr_from_mse(mse_u8(c.data_as<uint8_t>(), d.data_as<uint8_t>(), n)), 10.0 * std::log10(n),
                1e-12);
}

TEST(QualityMetrics, SsimHandComputed) {
    auto [a, b] = video_pair("smooth_noise", 1, 20, 24);
    auto same = ssim_rgb(a.data_as<uint8_t>(), a.data_as<uint8_t>(), 20, 24);
    ASSERT_TRUE(same.ok());
    EXPECT_EQ(*same, 1.0);
    // Constant frames: no variance, SSIM = luminance term (2·μa·μb + C1) / (μa² + μb² + C1).
    Tensor x = constant_frames(1, 13, 17, 100), y = constant_frames(1, 13, 17, 110);
    const double c1 = (0.01 * 255) * (0.01 * 255);
    std::array<double, 3> ch{};
    auto s = ssim_rgb(x.data_as<uint8_t>(), y.data_as<uint8_t>(), 13, 17, &ch);
    ASSERT_TRUE(s.ok());
    const double want = (2.0 * 100 * 110 + c1) / (100.0 * 100 + 110.0 * 110 + c1);
    EXPECT_NEAR(*s, want, 1e-12);
    for (double v : ch) EXPECT_NEAR(v, want, 1e-12);
    // the window must fit
    auto small = ssim_rgb(x.data_as<uint8_t>(), y.data_as<uint8_t>(), 10, 17);
    ASSERT_FALSE(small.ok());
    EXPECT_NE(small.status().message().find("at least 11x11"), std::string::npos)
        << small.status().to_string();
}

TEST(QualityMetrics, PsnrSsimMatchNumpyGolden) {
    const nlohmann::json g = golden();
    ASSERT_TRUE(g.contains("video"));
    const int frames = g["video"]["frames"], h = g["video"]["height"], w = g["video"]["width"];
    ASSERT_EQ(g["video"]["cases"].size(), 3u);
    for (const auto& [name, want] : g["video"]["cases"].items()) {
        SCOPED_TRACE(name);
        auto [a, b] = video_pair(name, frames, h, w);
        for (int threads : {1, 3}) {
            auto m = frame_metrics(a, b, threads);
            ASSERT_TRUE(m.ok()) << m.status().to_string();
            ASSERT_EQ(m->psnr.size(), static_cast<size_t>(frames));
            for (int f = 0; f < frames; ++f) {
                EXPECT_NEAR(m->psnr[f], want["psnr"][f].get<double>(), 1e-9) << f;
                EXPECT_NEAR(m->ssim[f], want["ssim"][f].get<double>(), 1e-9) << f;
            }
        }
        std::array<double, 3> ch{};
        ASSERT_TRUE(ssim_rgb(a.data_as<uint8_t>(), b.data_as<uint8_t>(), h, w, &ch).ok());
        for (int c = 0; c < 3; ++c)
            EXPECT_NEAR(ch[c], want["ssim_channels_frame0"][c].get<double>(), 1e-9) << c;
    }
}

TEST(QualityMetrics, SignalHandComputed) {
    const float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
    SignalMetrics m = signal_metrics(a, b, 4);
    EXPECT_EQ(m.count, 4);
    EXPECT_NEAR(m.cosine, 34.0 / std::sqrt(30.0 * 39.0), 1e-15);
    EXPECT_NEAR(m.snr_db, 10.0 * std::log10(30.0), 1e-12);
    EXPECT_NEAR(m.rmse, 0.5, 1e-15);
    EXPECT_NEAR(m.rms_ratio, std::sqrt(39.0 / 30.0), 1e-15);
    EXPECT_NEAR(m.rel_rms, std::sqrt(1.0 / 30.0), 1e-15);
    EXPECT_EQ(m.max_abs_diff, 1.0);
    SignalMetrics same = signal_metrics(a, a, 4);
    EXPECT_EQ(same.snr_db, kInf);
    EXPECT_NEAR(same.cosine, 1.0, 1e-15);
    EXPECT_EQ(same.rmse, 0.0);
    EXPECT_EQ(same.rms_ratio, 1.0);
    const float twice[4] = {2, 4, 6, 8}, neg[4] = {-1, -2, -3, -4}, zero[4] = {0, 0, 0, 0};
    SignalMetrics m2 = signal_metrics(a, twice, 4);
    EXPECT_NEAR(m2.rms_ratio, 2.0, 1e-15);
    EXPECT_NEAR(m2.snr_db, 0.0, 1e-12); // Σ(a−2a)² = Σa²
    EXPECT_NEAR(signal_metrics(a, neg, 4).cosine, -1.0, 1e-15);
    SignalMetrics z = signal_metrics(zero, a, 4);
    EXPECT_TRUE(std::isnan(z.cosine));
    EXPECT_EQ(z.snr_db, -kInf);
    EXPECT_EQ(z.rms_ratio, kInf);
    SignalMetrics zz = signal_metrics(zero, zero, 4);
    EXPECT_EQ(zz.snr_db, kInf);
    EXPECT_TRUE(std::isnan(zz.rms_ratio));
}

TEST(Compare, AudioMatchesGolden) {
    const nlohmann::json g = golden()["audio"];
    const int channels = g["channels"];
    auto [a, b] = audio_pair(channels, g["samples"].get<int64_t>());
    std::vector<std::string> warnings;
    auto r = compare_audio(a, 32000, b, 32000, "a.wav", "b.wav", &warnings);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(warnings.empty());
    auto check = [](const SignalMetrics& m, const nlohmann::json& w) {
        EXPECT_EQ(m.count, w["count"].get<int64_t>());
        for (auto [got, key] : {std::pair{m.cosine, "cosine"},
                                {m.snr_db, "snr_db"},
                                {m.rmse, "rmse"},
                                {m.rms_ratio, "rms_ratio"},
                                {m.rel_rms, "rel_rms"},
                                {m.max_abs_diff, "max_abs_diff"}})
            EXPECT_NEAR(got, w[key].get<double>(), 1e-10 * std::max(1.0, std::fabs(w[key].get<double>())))
                << key;
    };
    check(r->overall, g["overall"]);
    ASSERT_EQ(r->per_channel.size(), static_cast<size_t>(channels));
    for (int c = 0; c < channels; ++c) check(r->per_channel[c], g["per_channel"][c]);
}

TEST(Compare, AudioPairingRules) {
    auto [a, b] = audio_pair(2, 1000);
    std::vector<std::string> warnings;
    auto rate = compare_audio(a, 32000, b, 48000, "ref.wav", "x.wav", &warnings);
    ASSERT_FALSE(rate.ok());
    EXPECT_EQ(rate.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(rate.status().message().find("'ref.wav' vs 'x.wav'"), std::string::npos);
    EXPECT_NE(rate.status().message().find("32000 vs 48000"), std::string::npos);
    auto [m, mb] = audio_pair(1, 1000);
    auto ch = compare_audio(a, 32000, m, 32000, "ref.wav", "mono.wav", &warnings);
    ASSERT_FALSE(ch.ok());
    EXPECT_NE(ch.status().message().find("channel counts differ (2 vs 1)"), std::string::npos);
    // a longer B: the common prefix, with a warning; the prefix equals A → identical
    Tensor longer = Tensor::host(Shape{2, 1500}, DType::kF32);
    for (int c = 0; c < 2; ++c)
        for (int64_t i = 0; i < 1500; ++i)
            longer.data_as<float>()[c * 1500 + i] = i < 1000 ? a.data_as<float>()[c * 1000 + i] : 0.5f;
    auto pre = compare_audio(a, 32000, longer, 32000, "ref.wav", "long.wav", &warnings);
    ASSERT_TRUE(pre.ok()) << pre.status().to_string();
    EXPECT_EQ(pre->samples, 1000);
    EXPECT_EQ(pre->samples_b, 1500);
    EXPECT_EQ(pre->overall.snr_db, kInf);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("audio lengths differ (1000 vs 1500"), std::string::npos) << warnings[0];
}

TEST(Compare, VideoPairingRules) {
    auto [a, b] = video_pair("smooth_noise", 3, 20, 24);
    std::vector<std::string> warnings;
    auto same = compare_video(a, a, "a.mp4", "a.mp4", &warnings, 2);
    ASSERT_TRUE(same.ok());
    EXPECT_EQ(same->identical_frames, 3);
    EXPECT_EQ(same->psnr_mean, kInf);
    EXPECT_EQ(same->psnr_of_mean_mse, kInf);
    EXPECT_EQ(same->ssim_mean, 1.0);
    EXPECT_TRUE(warnings.empty());

    auto r = compare_video(a, b, "a.mp4", "b.mp4", &warnings);
    ASSERT_TRUE(r.ok());
    const nlohmann::json g = golden()["video"]["cases"]["smooth_noise"];
    double psnr_sum = 0, ssim_sum = 0, min_psnr = kInf;
    int64_t min_at = -1;
    for (int f = 0; f < 3; ++f) {
        psnr_sum += g["psnr"][f].get<double>();
        ssim_sum += g["ssim"][f].get<double>();
        if (g["psnr"][f].get<double>() < min_psnr) min_psnr = g["psnr"][f].get<double>(), min_at = f;
    }
    EXPECT_NEAR(r->psnr_mean, psnr_sum / 3, 1e-9);
    EXPECT_NEAR(r->ssim_mean, ssim_sum / 3, 1e-9);
    EXPECT_NEAR(r->psnr_min, min_psnr, 1e-9);
    EXPECT_EQ(r->psnr_min_frame, min_at);
    EXPECT_LE(r->psnr_of_mean_mse, r->psnr_mean + 1e-9) << "PSNR is concave in the MSE";
    EXPECT_EQ(r->identical_frames, 0);

    // One identical frame among different ones: excluded from the finite mean, counted as identical.
    Tensor mixed = Tensor::host(a.shape(), DType::kU8);
    std::memcpy(mixed.data(), b.data(), b.nbytes());
    std::memcpy(mixed.data(), a.data(), a.nbytes() / 3);
    auto mx = compare_video(a, mixed, "a.mp4", "m.mp4", &warnings);
    ASSERT_TRUE(mx.ok());
    EXPECT_EQ(mx->identical_frames, 1);
    EXPECT_EQ(mx->psnr[0], kInf);
    EXPECT_NEAR(mx->psnr_mean, (g["psnr"][1].get<double>() + g["psnr"][2].get<double>()) / 2, 1e-9);
    EXPECT_EQ(mx->ssim[0], 1.0);

    // Frame-count mismatch: common prefix + warning. Size mismatch: error naming both files.
    auto prefix = compare_video(a, a.slice(0, 0, 2), "a.mp4", "short.mp4", &warnings);
    ASSERT_TRUE(prefix.ok());
    EXPECT_EQ(prefix->frames, 2);
    EXPECT_EQ(prefix->frames_a, 3);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("frame counts differ (3 vs 2)"), std::string::npos);
    auto [c, d] = video_pair("smooth_noise", 3, 20, 26);
    auto size = compare_video(a, c, "a.mp4", "wide.mp4", &warnings);
    ASSERT_FALSE(size.ok());
    EXPECT_EQ(size.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(size.status().message().find("'a.mp4' vs 'wide.mp4': frame sizes differ (24x20 vs 26x20)"),
              std::string::npos)
        << size.status().to_string();
    auto tiny = compare_video(constant_frames(1, 8, 8, 0), constant_frames(1, 8, 8, 0), "a", "b", &warnings);
    EXPECT_FALSE(tiny.ok()) << "SSIM needs 11x11";
}

void write_latents(const std::string& path, const std::vector<std::pair<std::string, Shape>>& specs,
                   float scale) {
    std::vector<io::NamedTensor> ts;
    for (size_t k = 0; k < specs.size(); ++k) {
        Tensor t = Tensor::host(specs[k].second, DType::kF32);
        for (int64_t i = 0; i < t.numel(); ++i)
            t.data_as<float>()[i] = scale * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(k));
        ts.push_back({specs[k].first, t});
    }
    ASSERT_TRUE(io::write_safetensors(path, ts).ok());
}

TEST(Compare, LatentsFiles) {
    const std::string a = (out_dir() / "a.safetensors").string(), b = (out_dir() / "b.st").string(),
                      c = (out_dir() / "c.safetensors").string(), d = (out_dir() / "d.safetensors").string();
    write_latents(a, {{"video_latents", Shape{1, 24, 2, 2, 4}}, {"audio_latents", Shape{2, 32, 5}}}, 1.0f);
    write_latents(
        b,
        {{"video_latents", Shape{1, 24, 2, 2, 4}}, {"audio_latents", Shape{2, 32, 5}}, {"extra", Shape{3}}},
        1.1f);
    write_latents(c, {{"video_latents", Shape{1, 24, 3, 2, 4}}}, 1.0f);
    auto r = compare_files(a, b);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->kind, CompareKind::kLatents);
    ASSERT_TRUE(r->latents.has_value());
    ASSERT_EQ(r->latents->tensors.size(), 2u);
    EXPECT_EQ(r->latents->tensors[0].name, "video_latents");
    const SignalMetrics& m = r->latents->tensors[0].metrics;
    EXPECT_NEAR(m.cosine, 1.0, 1e-6); // B = 1.1·A
    EXPECT_NEAR(m.rel_rms, 0.1, 1e-6);
    EXPECT_NEAR(m.rms_ratio, 1.1, 1e-6);
    EXPECT_NEAR(m.snr_db, 20.0, 1e-4);
    EXPECT_EQ(r->latents->only_in_b, std::vector<std::string>{"extra"});
    ASSERT_EQ(r->warnings.size(), 1u);
    EXPECT_NE(r->warnings[0].find("extra"), std::string::npos);
    auto same = compare_files(a, a);
    ASSERT_TRUE(same.ok());
    EXPECT_EQ(same->latents->tensors[1].metrics.snr_db, kInf);
    EXPECT_EQ(same->latents->tensors[1].metrics.max_abs_diff, 0.0);
    auto shape = compare_files(a, c);
    ASSERT_FALSE(shape.ok());
    EXPECT_EQ(shape.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(shape.status().message().find("'video_latents' has shape [1, 24, 2, 2, 4] vs [1, 24, 3, 2, 4]"),
              std::string::npos)
        << shape.status().to_string();
    write_latents(d, {{"other", Shape{4}}}, 1.0f);
    auto none = compare_files(a, d);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.status().message().find("share no floating-point tensor"), std::string::npos);
}

TEST(Compare, KindsAndMissingFiles) {
    const std::string wav = (out_dir() / "k.wav").string(), lat = (out_dir() / "k.safetensors").string(),
                      empty = (out_dir() / "empty.mp4").string();
    auto [a, b] = audio_pair(2, 100);
    ASSERT_TRUE(io::write_wav(wav, a, 32000).ok());
    write_latents(lat, {{"audio_latents", Shape{2, 32, 5}}}, 1.0f);
    std::ofstream(empty).close();
    EXPECT_EQ(*detect_compare_kind(wav), CompareKind::kAudio);
    EXPECT_EQ(*detect_compare_kind(lat), CompareKind::kLatents);
    auto kinds = compare_files(wav, lat);
    ASSERT_FALSE(kinds.ok());
    EXPECT_EQ(kinds.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(
        kinds.status().message().find("'" + wav + "' vs '" + lat + "': different kinds (audio vs latents)"),
        std::string::npos)
        << kinds.status().to_string();
    const std::string missing = (out_dir() / "missing.mp4").string();
    auto miss = compare_files(wav, missing);
    ASSERT_FALSE(miss.ok());
    EXPECT_EQ(miss.status().code(), ErrorCode::kNotFound);
    EXPECT_NE(miss.status().message().find(missing), std::string::npos);
    EXPECT_EQ(detect_compare_kind(empty).status().code(), ErrorCode::kBadInput);
    EXPECT_EQ(detect_compare_kind(out_dir().string()).status().code(), ErrorCode::kBadInput);
    // WAV through compare_files: PCM16 quantization only (|Δ| ≤ 0.5/32767)
    ASSERT_TRUE(io::write_wav((out_dir() / "k2.wav").string(), a, 32000, io::WavFormat::kFloat32).ok());
    auto w = compare_files((out_dir() / "k2.wav").string(), wav);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    ASSERT_TRUE(w->audio.has_value());
    EXPECT_LE(w->audio->overall.max_abs_diff, 0.5 / 32767 + 1e-7);
    EXPECT_GT(w->audio->overall.snr_db, 80.0);
}

TEST(Compare, JsonReport) {
    CompareReport r;
    r.kind = CompareKind::kVideo;
    r.a = "a.mp4";
    r.b = "b.mp4";
    auto [a, b] = video_pair("smooth_noise", 2, 20, 24);
    Tensor mixed = Tensor::host(a.shape(), DType::kU8);
    std::memcpy(mixed.data(), a.data(), a.nbytes());
    std::memcpy(mixed.data_as<uint8_t>() + a.nbytes() / 2, b.data_as<uint8_t>() + a.nbytes() / 2,
                a.nbytes() / 2);
    auto v = compare_video(a, mixed, "a.mp4", "b.mp4", &r.warnings);
    ASSERT_TRUE(v.ok());
    r.video = *v;
    const float z[2] = {0, 0};
    r.audio.emplace();
    r.audio->channels = 1;
    r.audio->sample_rate = 32000;
    r.audio->samples = r.audio->samples_a = r.audio->samples_b = 2;
    r.audio->overall = signal_metrics(z, z, 2); // cosine NaN, SNR +inf
    r.audio->per_channel = {r.audio->overall};
    const nlohmann::json j = nlohmann::json::parse(compare_report_json(r).dump());
    EXPECT_EQ(j["kind"], "video");
    EXPECT_EQ(j["a"], "a.mp4");
    EXPECT_TRUE(j["latents"].is_null());
    EXPECT_EQ(j["video"]["frames"], 2);
    EXPECT_EQ(j["video"]["width"], 24);
    EXPECT_EQ(j["video"]["psnr_per_frame"][0], "inf");
    EXPECT_TRUE(j["video"]["psnr_per_frame"][1].is_number());
    EXPECT_TRUE(j["video"]["psnr_mean"].is_number());
    EXPECT_EQ(j["video"]["ssim_per_frame"][0], 1.0);
    EXPECT_EQ(j["video"]["identical_frames"], 1);
    EXPECT_TRUE(j["audio"]["overall"]["cosine"].is_null());
    EXPECT_EQ(j["audio"]["overall"]["snr_db"], "inf");
    EXPECT_EQ(j["audio"]["per_channel"].size(), 1u);
    EXPECT_TRUE(j["warnings"].is_array());
    const std::string text = compare_report_text(r);
    EXPECT_NE(text.find("1 identical"), std::string::npos) << text;
    EXPECT_NE(text.find("SNR inf dB"), std::string::npos) << text;
}

#ifdef H3_WITH_FFMPEG
// A smooth moving pattern (yuv420p-friendly), 64x48, and a stereo tone.
Tensor smooth_clip(int frames, int h, int w) {
    Tensor t = Tensor::host(Shape{frames, h, w, 3}, DType::kU8);
    for (int f = 0; f < frames; ++f)
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x)
                for (int c = 0; c < 3; ++c)
                    t.data_as<uint8_t>()[((static_cast<int64_t>(f) * h + y) * w + x) * 3 + c] =
                        static_cast<uint8_t>(128 + 90 * std::sin(0.11 * x + 0.07 * y + 0.3 * f + 2.0 * c) *
                                                       std::cos(0.05 * (x - y)));
    return t;
}

Tensor tone(int channels, int64_t n, int rate) {
    Tensor a = Tensor::host(Shape{channels, n}, DType::kF32);
    for (int c = 0; c < channels; ++c)
        for (int64_t i = 0; i < n; ++i)
            a.data_as<float>()[c * n + i] =
                0.4f * std::sin(2.0f * static_cast<float>(M_PI) * (330.0f + 110.0f * c) * i / rate);
    return a;
}

TEST(MediaReader, Mp4RoundTrip) {
    const int nf = 30, h = 48, w = 64, rate = 32000;
    const int64_t samples = 32000;
    const std::string path = (out_dir() / "round.mp4").string();
    Tensor frames = smooth_clip(nf, h, w), audio = tone(2, samples, rate);
    ASSERT_TRUE(io::write_mp4(path, frames, audio, rate, {.fps = 24, .crf = 12}).ok());
    auto m = io::read_mp4(path);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ(m->frames.shape(), (Shape{nf, h, w, 3}));
    EXPECT_EQ(m->fps, 24.0);
    EXPECT_EQ(m->fps_num, 24);
    EXPECT_EQ(m->fps_den, 1);
    EXPECT_EQ(m->video_codec, "h264");
    EXPECT_EQ(m->audio_codec, "aac");
    EXPECT_EQ(m->sample_rate, rate);
    ASSERT_TRUE(m->audio.defined());
    EXPECT_EQ(m->audio.dim(0), 2);
    // Priming is dropped; the last AAC frame's padding is not trimmed (write_mp4 writes no end trim).
    EXPECT_GE(m->audio.dim(1), samples);
    EXPECT_LT(m->audio.dim(1), samples + 1024);
    std::vector<std::string> warnings;
    auto v = compare_video(frames, m->frames, "src", path, &warnings);
    ASSERT_TRUE(v.ok());
    EXPECT_GT(v->psnr_min, 38.0) << "crf 12 is near-lossless (43 dB when written)";
    EXPECT_GT(v->ssim_min, 0.98);
    EXPECT_TRUE(warnings.empty());
    // The AAC track is the tone again (priming dropped by the demuxer: aligned, high cosine).
    auto a = compare_audio(audio, rate, m->audio, m->sample_rate, "src", path, &warnings);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_GT(a->overall.cosine, 0.99);
    EXPECT_GT(a->overall.snr_db, 20.0); // 31 dB when written
    EXPECT_NEAR(a->overall.rms_ratio, 1.0, 0.02);

    // Options: a frame cap, video skipped.
    auto capped = io::read_media(path, {.max_frames = 7});
    ASSERT_TRUE(capped.ok());
    EXPECT_EQ(capped->frames.dim(0), 7);
    for (int64_t i = 0; i < capped->frames.numel(); ++i)
        ASSERT_EQ(capped->frames.data_as<uint8_t>()[i], m->frames.data_as<uint8_t>()[i])
            << "deterministic decode";
    auto audio_only = io::read_media(path, {.video = false});
    ASSERT_TRUE(audio_only.ok());
    EXPECT_FALSE(audio_only->frames.defined());
    EXPECT_EQ(audio_only->audio.shape(), m->audio.shape());

    // Through compare_files: same file → identical; a re-encode at another CRF → finite, lower PSNR.
    auto same = compare_files(path, path, {.threads = 2});
    ASSERT_TRUE(same.ok()) << same.status().to_string();
    EXPECT_EQ(same->video->identical_frames, nf);
    EXPECT_EQ(same->audio->overall.snr_db, kInf);
    const std::string worse = (out_dir() / "worse.mp4").string();
    ASSERT_TRUE(io::write_mp4(worse, frames, Tensor(), rate, {.fps = 25, .crf = 40}).ok());
    auto diff = compare_files(path, worse);
    ASSERT_TRUE(diff.ok()) << diff.status().to_string();
    EXPECT_TRUE(std::isfinite(diff->video->psnr_mean));
    EXPECT_LT(diff->video->psnr_mean, v->psnr_mean);
    EXPECT_FALSE(diff->audio.has_value());
    ASSERT_EQ(diff->warnings.size(), 2u);
    EXPECT_NE(diff->warnings[0].find("frame rates differ (24 vs 25 fps)"), std::string::npos)
        << diff->warnings[0];
    EXPECT_NE(diff->warnings[1].find("has audio"), std::string::npos);
}

TEST(MediaReader, Errors) {
    const std::string missing = (out_dir() / "nope.mp4").string();
    auto m = io::read_media(missing);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), ErrorCode::kNotFound);
    EXPECT_NE(m.status().message().find(missing), std::string::npos);
    const std::string junk = (out_dir() / "junk.mp4").string();
    std::ofstream(junk) << "this is not a video";
    auto j = io::read_media(junk);
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().code(), ErrorCode::kBadInput);
    EXPECT_NE(j.status().message().find(junk), std::string::npos);
    // a WAV demuxes fine but has no video stream
    const std::string wav = (out_dir() / "tone.wav").string();
    ASSERT_TRUE(io::write_wav(wav, tone(1, 3200, 32000), 32000).ok());
    auto nv = io::read_media(wav);
    ASSERT_FALSE(nv.ok());
    EXPECT_NE(nv.status().message().find("has no video stream"), std::string::npos)
        << nv.status().to_string();
    auto au = io::read_media(wav, {.video = false});
    ASSERT_TRUE(au.ok()) << au.status().to_string();
    EXPECT_EQ(au->audio.shape(), (Shape{1, 3200}));
    EXPECT_NEAR(au->audio.data_as<float>()[100],
                std::round(tone(1, 3200, 32000).data_as<float>()[100] * 32767) / 32768, 1e-6)
        << "FFmpeg scales PCM16 by 1/32768";
    // a truncated MP4: the header is cut off
    const std::string cut = (out_dir() / "cut.mp4").string();
    ASSERT_TRUE(io::write_mp4(cut, smooth_clip(5, 16, 16), Tensor(), 32000).ok());
    fs::resize_file(cut, 200);
    auto t = io::read_media(cut);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find(cut), std::string::npos) << t.status().to_string();
}
#else
TEST(MediaReader, UnavailableWithoutFfmpeg) {
    auto m = io::read_media("x.mp4");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), ErrorCode::kUnimplemented);
    EXPECT_NE(m.status().message().find("no FFmpeg"), std::string::npos);
}
#endif

} // namespace
} // namespace h3::pipeline
