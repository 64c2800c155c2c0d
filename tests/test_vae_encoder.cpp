// Video VAE encoder goldens (tools/reference/make_vae_encoder_goldens.py, a PyTorch reference written from
// the spec, §3 step 4 and §9.1): one frame, one frame tiled (uneven overlaps), 22 frames (2 clips,
// token_drop), 22 frames tiled; the keyframe recipe (seed 42, fp16, normalized). Tolerance: fp32 on both
// sides with different summation orders, so max |got − want| <= 1e-4 · max |want|. The keyframe latents round
// to fp16: an element whose fp32 value sits on a rounding boundary may land one fp16 ulp away, so those are
// allowed one ulp (scaled by 1/latents_std). With a CUDA device the same goldens are checked on the GPU, and
// the CUDA encoder is compared with the CPU one on make-tiny's official-structure encoder.
#include "cli/device_setup.h"
#include "core/cuda_api.h"
#include "golden_compare.h"
#include "io/safetensors.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/tiny/tiny_vae.h"
#include "model/video_vae/video_vae_encoder.h"
#include "ops/ops.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace h3::model {
namespace {

namespace fs = std::filesystem;

std::string data(const std::string& f) {
    return std::string(H3_SOURCE_DIR) + "/tests/data/vae/" + f;
}

Tensor io(const std::string& name) {
    auto f = io::SafetensorsFile::open(data("encoder_io.safetensors"));
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    auto t = f->tensor(name);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    if (t->dtype() == DType::kU8) return t->to_dtype(DType::kU8).value(); // a writable host copy
    return t->to_dtype(DType::kF32).value();
}

void expect_close(const Tensor& got, const Tensor& want, double rel, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    const auto d = testing_support::compare(got, want);
    EXPECT_LE(d.max_abs, rel * d.ref_max) << what << ": max |Δ| " << d.max_abs << " vs max |want| "
                                          << d.ref_max << " (rel rms " << d.rel_rms << ")";
}

// The normalized keyframe latent: 1e-4 of the scale, or one fp16 ulp of z = want·std_c + mean_c.
void expect_latent_close(const Tensor& got, const Tensor& want, const VideoVaeConfig& c, double rel,
                         const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    const auto g = to_f32_vector(got).value(), w = to_f32_vector(want).value();
    double scale = 0.0;
    for (float v : w) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    const int64_t per = want.numel() / want.dim(1);
    int ulp_steps = 0;
    for (size_t i = 0; i < g.size(); ++i) {
        const size_t ch = i / static_cast<size_t>(per);
        const double err = std::fabs(static_cast<double>(g[i]) - w[i]);
        if (err <= rel * scale) continue;
        const double z = std::fabs(w[i] * c.latents_std[ch] + c.latents_mean[ch]);
        const double ulp = std::ldexp(1.0, std::max(-24, static_cast<int>(std::floor(std::log2(z))) - 10));
        EXPECT_LE(err, 1.01 * ulp / c.latents_std[ch] + rel * scale) << what << " at " << i;
        ++ulp_steps;
    }
    EXPECT_LE(ulp_steps, static_cast<int>(g.size() / 50 + 1)) << what << ": too many fp16 rounding flips";
}

struct Case {
    std::string name;
    VideoEncodeOptions opt;
};
const Case kCases[] = {{"frame", {}},
                       {"tiled", {.tile = 16, .min_overlap = 8}},
                       {"clip", {}},
                       {"clip_tiled", {.tile = 16, .min_overlap = 8}}};

// `tf32`: the CUDA convolutions on TF32 tensor cores (the CUDA default); false: exact fp32 (the CPU always
// is).
void check_goldens(const ops::Context& ctx, const VideoVaeEncoder& enc, double rel, bool tf32 = false) {
    for (const Case& cs : kCases) {
        SCOPED_TRACE(cs.name);
        VideoEncodeOptions opt = cs.opt;
        opt.tf32 = tf32;
        auto post = encode_video(ctx, enc, io(cs.name + "_rgb"), opt);
        ASSERT_TRUE(post.ok()) << post.status().to_string();
        expect_close(post->mean, io(cs.name + "_mean"), rel, cs.name + " mean");
        expect_close(post->std, io(cs.name + "_std"), rel, cs.name + " std");
    }
    for (const std::string name : {"frame", "tiled"}) {
        VideoEncodeOptions opt = name == "tiled" ? kCases[1].opt : VideoEncodeOptions{};
        opt.tf32 = tf32;
        Tensor img = io(name + "_rgb");
        auto lat = encode_keyframe(ctx, enc, img.view({img.dim(1), img.dim(2), 3}), opt);
        ASSERT_TRUE(lat.ok()) << lat.status().to_string();
        expect_latent_close(*lat, io(name + "_latent"), enc.config, rel, name + " keyframe latent");
    }
}

TEST(VideoVaeEncoder, MatchesGoldensOnCpu) {
    auto enc = load_video_vae_encoder(data("encoder"), Device::cpu());
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    EXPECT_EQ(enc->config.patch, 4);
    EXPECT_EQ(enc->weights.levels.size(), 4u);
    EXPECT_TRUE(enc->weights.levels[1].resnets[0].shortcut.w.defined());
    EXPECT_FALSE(enc->weights.levels[1].resnets[1].shortcut.w.defined());
    EXPECT_FALSE(enc->weights.levels[2].down.w.defined());
    check_goldens(ops::Context::cpu(), *enc, 1e-4);
}

// The sampling recipe alone from the golden posterior: the same ε (torch's CPU randn, seed 42), the same fp16
// rounding and normalization, so the result is the golden's to the last bit (up to the division).
TEST(VideoVaeEncoder, KeyframeSamplingMatchesTorch) {
    auto enc = load_video_vae_encoder(data("encoder"), Device::cpu());
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    for (const std::string name : {"frame", "tiled"}) {
        const VideoPosterior post{io(name + "_mean"), io(name + "_std")};
        const Tensor lat = sample_normalized_latent(post, enc->config, 42);
        expect_close(lat, io(name + "_latent"), 1e-6, name + " sampled from the golden posterior");
        const Tensor other = sample_normalized_latent(post, enc->config, 43);
        EXPECT_GT(testing_support::compare(other, lat).max_abs, 1e-2) << "the seed must matter";
    }
    // logvar channel 0 sits below −30 in the tiny weights: its std is exp(−15).
    const Tensor sd = io("frame_std");
    for (int64_t i = 0; i < sd.numel() / 24; ++i)
        EXPECT_NEAR(sd.data_as<const float>()[i], std::exp(-15.0), 1e-12) << i;
}

// f32 input equals u8 input; untiled differs from tiled; batching tiles changes nothing beyond summation
// order.
TEST(VideoVaeEncoder, InputFormsTilingAndBatches) {
    auto enc = load_video_vae_encoder(data("encoder"), Device::cpu());
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    const ops::Context cpu = ops::Context::cpu();
    const Tensor rgb = io("tiled_rgb");
    const VideoEncodeOptions opt{.tile = 16, .min_overlap = 8};
    auto a = encode_video(cpu, *enc, rgb, opt);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    Tensor px = normalize_rgb8(rgb);
    EXPECT_EQ(px.shape(), (Shape{3, 1, 28, 44}));
    auto b = encode_video(cpu, *enc, px.view({1, 3, 1, 28, 44}), opt);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(testing_support::compare(a->mean, b->mean).max_abs, 0.0);
    VideoEncodeOptions batched = opt;
    batched.tile_batch = 4;
    auto c = encode_video(cpu, *enc, rgb, batched);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    expect_close(c->mean, a->mean, 1e-5, "4 tiles per call");
    auto u = encode_video(cpu, *enc, rgb, {.tiling = false});
    ASSERT_TRUE(u.ok()) << u.status().to_string();
    EXPECT_GT(testing_support::compare(u->mean, a->mean).max_abs, 1e-3) << "tiling must change the result";
}

TEST(VideoVaeEncoder, RejectsBadCheckpointsAndInputs) {
    const fs::path tmp = fs::path(H3_BINARY_DIR) / "test_vae_encoder_bad";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    fs::copy(data("encoder"), tmp, fs::copy_options::recursive);
    auto edit = [&](auto f) {
        auto j = nlohmann::json::parse(std::ifstream(tmp / "config.json"));
        f(j);
        std::ofstream(tmp / "config.json") << j.dump();
    };
    edit([](auto& j) { j["layers_per_block"] = 3; });
    auto r = load_video_vae_encoder(tmp.string(), Device::cpu());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().to_string().find("resnets.2"), std::string::npos) << r.status().to_string();
    edit([](auto& j) {
        j["layers_per_block"] = 2;
        j["norm_num_groups"] = 3;
    });
    r = load_video_vae_encoder(tmp.string(), Device::cpu());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().to_string().find("norm_num_groups"), std::string::npos) << r.status().to_string();
    edit([](auto& j) {
        j["norm_num_groups"] = 2;
        j["block_out_channels"] = {4, 8, 8, 16};
    });
    r = load_video_vae_encoder(tmp.string(), Device::cpu());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().to_string().find("shape"), std::string::npos) << r.status().to_string();

    auto enc = load_video_vae_encoder(data("encoder"), Device::cpu());
    ASSERT_TRUE(enc.ok());
    const ops::Context cpu = ops::Context::cpu();
    EXPECT_FALSE(encode_video(cpu, *enc, Tensor::host(Shape{2, 8, 8, 4}, DType::kU8)).ok()) << "4 channels";
    EXPECT_FALSE(encode_video(cpu, *enc, Tensor::host(Shape{2, 8, 8, 3}, DType::kI32)).ok());
    EXPECT_FALSE(encode_keyframe(cpu, *enc, Tensor::host(Shape{2, 8, 8, 3}, DType::kU8)).ok()) << "2 frames";
    EXPECT_FALSE(
        encode_video(cpu, *enc, Tensor::host(Shape{1, 8, 8, 3}, DType::kU8), {.tile = 16, .min_overlap = 6})
            .ok())
        << "overlap not a multiple of the ratio";
    // 22 frames -> 7 latents (17n+5 -> 5n+2), 5 frames -> 2
    auto p = encode_video(cpu, *enc, Tensor::host(Shape{5, 8, 8, 3}, DType::kU8));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->mean.shape(), (Shape{1, 24, 2, 2, 2}));
}

// make-tiny's vae/ carries an encoder of the official structure (6 levels, ×16, ×4): it loads through the
// real loader and encodes a keyframe and a 22-frame video to the latent grid the pipeline plans.
TEST(VideoVaeEncoder, MakeTinyEncoder) {
    const fs::path tmp = fs::path(H3_BINARY_DIR) / "test_vae_encoder_tiny";
    fs::remove_all(tmp);
    ASSERT_TRUE(write_tiny_checkpoint({.dir = tmp.string(), .seed = 5}).ok());
    const auto cfg = nlohmann::json::parse(std::ifstream(tmp / "vae" / "config.json"));
    EXPECT_EQ(cfg.at("block_out_channels").size(), 6u);
    auto enc = load_video_vae_encoder((tmp / "vae").string(), Device::cpu());
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    EXPECT_EQ(enc->config.patch, 16);
    EXPECT_EQ(enc->config.patch_t, 4);
    auto dec = load_video_vae((tmp / "vae").string(), Device::cpu());
    ASSERT_TRUE(dec.ok()) << dec.status().to_string();
    Tensor img = Tensor::host(Shape{64, 96, 3}, DType::kU8);
    for (int64_t i = 0; i < img.numel(); ++i)
        img.data_as<uint8_t>()[i] = static_cast<uint8_t>((i * 37) % 251);
    const ops::Context cpu = ops::Context::cpu();
    auto lat = encode_keyframe(cpu, *enc, img);
    ASSERT_TRUE(lat.ok()) << lat.status().to_string();
    EXPECT_EQ(lat->shape(), (Shape{1, 24, 1, 4, 6}));
    const std::vector<float> lv = to_f32_vector(*lat).value();
    for (float v : lv) ASSERT_TRUE(std::isfinite(v));
    Tensor video = Tensor::host(Shape{22, 32, 48, 3}, DType::kU8);
    for (int64_t i = 0; i < video.numel(); ++i)
        video.data_as<uint8_t>()[i] = static_cast<uint8_t>((i * 13) % 253);
    auto post = encode_video(cpu, *enc, video);
    ASSERT_TRUE(post.ok()) << post.status().to_string();
    EXPECT_EQ(post->mean.shape(), (Shape{1, 24, 7, 2, 3}));
}

// The CUDA encoder against the goldens, and against the CPU encoder on make-tiny's official-structure weights
// (a 288×320 image: 2×2 tiles of 256 px, batched into one call on the GPU): the exact fp32 path at 1e-4, the
// default TF32 path (10-bit mantissa products, ~1e-3 relative through the stack) at 1e-2.
TEST(VideoVaeEncoderCuda, MatchesGoldensAndCpu) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto enc = load_video_vae_encoder(data("encoder"), ctx.device);
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    check_goldens(ctx, *enc, 1e-4, /*tf32=*/false);
    check_goldens(ctx, *enc, 1e-2, /*tf32=*/true);

    const fs::path tmp = fs::path(H3_BINARY_DIR) / "test_vae_encoder_cuda";
    fs::remove_all(tmp);
    ASSERT_TRUE(write_tiny_checkpoint({.dir = tmp.string(), .seed = 7}).ok());
    auto cpu_enc = load_video_vae_encoder((tmp / "vae").string(), Device::cpu());
    auto gpu_enc = load_video_vae_encoder((tmp / "vae").string(), ctx.device);
    ASSERT_TRUE(cpu_enc.ok() && gpu_enc.ok());
    Tensor img = Tensor::host(Shape{288, 320, 3}, DType::kU8);
    for (int64_t i = 0; i < img.numel(); ++i)
        img.data_as<uint8_t>()[i] = static_cast<uint8_t>((i * 29) % 255);
    auto want = encode_video(ops::Context::cpu(), *cpu_enc, img.view({1, 288, 320, 3}));
    auto got = encode_video(ctx, *gpu_enc, img.view({1, 288, 320, 3}), {.tf32 = false});
    auto got_tf32 = encode_video(ctx, *gpu_enc, img.view({1, 288, 320, 3}));
    ASSERT_TRUE(want.ok() && got.ok() && got_tf32.ok());
    expect_close(got->mean, want->mean, 1e-4, "CUDA vs CPU mean (tiny official structure)");
    expect_close(got->std, want->std, 1e-4, "CUDA vs CPU std (tiny official structure)");
    expect_close(got_tf32->mean, want->mean, 1e-2, "CUDA TF32 vs CPU mean (tiny official structure)");
    expect_close(got_tf32->std, want->std, 1e-2, "CUDA TF32 vs CPU std (tiny official structure)");
}

// H3_VAE_BENCH=1: the official-size encoder with random weights on the GPU, one 1344×768 keyframe timed.
TEST(VideoVaeEncoderCuda, OfficialSizeTiming) {
    if (cuda::device_count() == 0 || !std::getenv("H3_VAE_BENCH"))
        GTEST_SKIP() << "set H3_VAE_BENCH=1 on a GPU";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok());
    const ops::Context& ctx = (*session)->context();
    VideoVaeConfig c;
    c.latents_mean.assign(24, 0.0f);
    c.latents_std.assign(24, 1.0f);
    auto enc = random_video_vae_encoder(ctx, c, 1);
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    Tensor img = Tensor::host(Shape{768, 1344, 3}, DType::kU8);
    for (int64_t i = 0; i < img.numel(); ++i)
        img.data_as<uint8_t>()[i] = static_cast<uint8_t>((i * 31) % 256);
    ASSERT_TRUE(encode_keyframe(ctx, *enc, img).ok()); // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    auto lat = encode_keyframe(ctx, *enc, img);
    ASSERT_TRUE(lat.ok()) << lat.status().to_string();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(lat->shape(), (Shape{1, 24, 1, 48, 84}));
    std::printf("{\"keyframe_encode_seconds_1344x768\": %.4f}\n", s);
}

} // namespace
} // namespace h3::model
