// Decoder goldens (tools/reference/make_vae_goldens.py, a PyTorch reference written from the spec):
// Kaiser-sinc filter, SnakeBeta and the alias-free activation; the official tile/clip layout for 768×1344 and
// 768×768; the tiny audio decoder; the tiny video decoder (one untiled call, and 2 clips × 2×3 tiles with
// padded latents). Tolerance: fp32 on both sides with different summation orders (BLAS vs torch), so
// |got − want| <= 1e-4 · max|want| (+ 1e-6 for the filters), i.e. 1e-4 relative to the signal's scale.
#include "cli/device_setup.h"
#include "core/cuda_api.h"
#include "io/safetensors.h"
#include "model/audio_vae/audio_vae.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/tiny/tiny_vae.h"
#include "model/video_vae/video_vae.h"
#include "model/video_vae/video_vae_cost.h"
#include "ops/ops.h"
#include "ops/provenance.h"
#include "pipeline/quality_metrics.h"
#include "runtime/model_store.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace h3::model {
namespace {

namespace fs = std::filesystem;

std::string data(const std::string& f) {
    return std::string(H3_SOURCE_DIR) + "/tests/data/vae/" + f;
}

Tensor golden(const std::string& file, const std::string& name) {
    auto f = io::SafetensorsFile::open(data(file));
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    auto t = f->tensor(name);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    auto c = t->to_dtype(DType::kF32);
    return std::move(c).value();
}

void expect_close(const Tensor& got, const Tensor& want, double rel, double abs_floor,
                  const std::string& what) {
    ASSERT_EQ(got.numel(), want.numel()) << what << ": " << got.describe() << " vs " << want.describe();
    auto g = to_f32_vector(got).value(), w = to_f32_vector(want).value();
    double scale = 0.0;
    for (float v : w) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    const double tol = rel * scale + abs_floor;
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < g.size(); ++i) {
        ASSERT_TRUE(std::isfinite(g[i])) << what << ": non-finite at " << i;
        const double e = std::fabs(static_cast<double>(g[i]) - w[i]);
        if (e > worst) worst = e, at = i;
    }
    EXPECT_LE(worst, tol) << what << ": worst error " << worst << " at " << at << " (got " << g[at]
                          << ", want " << w[at] << "), tolerance " << tol;
}

TEST(VaeFilters, KaiserSincAndActivations) {
    const Tensor want = golden("filters.safetensors", "kaiser_up");
    const auto f = kaiser_sinc_filter(0.25, 0.3, 12);
    expect_close(host_tensor_from(f, Shape{12}), want, 0.0, 1e-6, "kaiser_sinc_filter");
    double sum = 0.0;
    for (float v : f) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-6);

    const Tensor x = golden("filters.safetensors", "act_x");
    const Tensor a = golden("filters.safetensors", "act_alpha"),
                 b = golden("filters.safetensors", "act_beta");
    const ops::Context cpu = ops::Context::cpu();
    Tensor y = Tensor::host(x.shape(), DType::kF32);
    ASSERT_TRUE(ops::snake_beta(cpu, x, a, b, y).ok());
    expect_close(y, golden("filters.safetensors", "snake_y"), 1e-6, 1e-6, "snake_beta");
    Tensor filt = host_tensor_from(f, Shape{12});
    ASSERT_TRUE(ops::alias_free_snake_beta(cpu, {}, x, a, b, filt, filt, y).ok());
    expect_close(y, golden("filters.safetensors", "alias_free_y"), 1e-5, 1e-6, "alias_free_snake_beta");
}

TEST(VaeLayout, OfficialTilesAndClips) {
    std::ifstream in(data("layout.json"));
    ASSERT_TRUE(in.good());
    const auto j = nlohmann::json::parse(in);
    const int tile = j["tile"], ov = j["min_overlap"], ratio = j["ratio"];
    ASSERT_EQ(j["tiles"].size(), 2u);
    for (const auto& g : j["tiles"]) {
        SCOPED_TRACE(std::to_string(g["height"].get<int>()) + "x" + std::to_string(g["width"].get<int>()));
        const TileLayout ty = split_tiles(g["height"], tile, ov, ratio);
        const TileLayout tx = split_tiles(g["width"], tile, ov, ratio);
        EXPECT_EQ(ty.starts, g["y_starts"].get<std::vector<int>>());
        EXPECT_EQ(ty.overlaps, g["y_overlaps"].get<std::vector<int>>());
        EXPECT_EQ(tx.starts, g["x_starts"].get<std::vector<int>>());
        EXPECT_EQ(tx.overlaps, g["x_overlaps"].get<std::vector<int>>());
    }
    // The spec's own numbers (§9.3), independent of the golden file.
    EXPECT_EQ(split_tiles(1344, 256, 64, 16).starts, (std::vector<int>{0, 176, 352, 528, 704, 896, 1088}));
    EXPECT_EQ(split_tiles(768, 256, 64, 16).overlaps, (std::vector<int>{96, 80, 80}));
    EXPECT_EQ(split_tiles(200, 256, 64, 16).starts, (std::vector<int>{0}));
    for (const auto& g : j["clips"]) {
        const int t = g["latents"];
        SCOPED_TRACE("T = " + std::to_string(t));
        const ClipPlan p = plan_clips(t, 17, 4, 3);
        EXPECT_EQ(p.pad_tokens, g["pad_tokens"].get<int>());
        EXPECT_EQ(p.num_chunks, g["num_chunks"].get<int>());
        EXPECT_EQ(p.starts, g["clip_starts"].get<std::vector<int>>());
        EXPECT_EQ(p.clip_latents, g["clip_length"].get<int>());
        EXPECT_EQ(p.frame_pre_padding, g["frame_pre_padding"].get<int>());
        EXPECT_EQ(p.frame_overlap, g["frame_overlap"].get<int>());
        EXPECT_EQ(p.trim_frames, g["trim_frames"].get<int>());
        EXPECT_EQ(p.frames, g["frames"].get<int>());
    }
    const ClipPlan p37 = plan_clips(37, 17, 4, 3);
    EXPECT_EQ(p37.frames, 124);
    EXPECT_EQ(p37.num_chunks * 4 * 7, 196) << "768x1344x124: 28 tiles x 7 clips";
    EXPECT_EQ(plan_clips(2, 17, 4, 3).num_chunks, 0);
}

// video_decode_cost against a hand count on a small config: D = 2·16 = 32, F = 2·32 = 64, 2 blocks, 2
// registers, 4 latent channels, patch 2 (pixels per token 3·4·2·2 = 48). 12 latents -> 2 clips of 7;
// 3×5 latents = 6×10 px in 4-px tiles with 2-px overlaps -> 2×4 tiles of 2×2 latents: 16 tile-clips of
// n = 7·2·2 = 28 tokens, S = 28 + 2 + 1 = 31 rows.
TEST(VaeLayout, DecodeCostMatchesAHandCount) {
    VideoVaeConfig c;
    c.latent_channels = 4, c.num_layers = 2, c.num_heads = 2, c.head_dim = 16, c.ffn_mult = 2;
    c.num_register_tokens = 2, c.patch = 2;
    const VideoDecodeOptions o{.tile = 4, .min_overlap = 2, .tile_batch = 3};
    const VideoDecodeCost cost = video_decode_cost(c, 12, 3, 5, o, Device::cpu(), DType::kF16);
    EXPECT_EQ(cost.tile_clips, 16);
    EXPECT_EQ(cost.calls, 6) << "8 tiles per clip in calls of 3, 3, 2";
    EXPECT_EQ(cost.rows, 16 * 31);
    // per row per block: q, k, v, out 4·32·32 = 4096, ff in 2·64·32 = 4096, ff out 32·64 = 2048 -> 10,240
    // multiply-adds; 2 FLOPs each, 31 rows, 2 blocks, 16 tile-clips
    EXPECT_DOUBLE_EQ(cost.block_gemm_flops, 16.0 * 2 * 31 * 10240 * 2);
    // QKᵀ and P·V: 2 · 2·S²·D per block
    EXPECT_DOUBLE_EQ(cost.attention_flops, 16.0 * 4 * 31 * 31 * 32 * 2);
    // post_quant 4·4, proj_in 4·32, proj_out 32·48 per token, 28 tokens
    EXPECT_DOUBLE_EQ(cost.other_gemm_flops, 16.0 * 2 * 28 * (16 + 128 + 1536));
    // weights per call: block GEMMs 2·(4096 + 4096 + 2048) = 20,480 weights + 2·(4·32 + 128 + 32) = 576
    // biases in f16; fp32: 2 blocks · 4·32 (norms, scales) + post_quant 16 + 4, proj_in 128 + 32, registers
    // 64, norm_out 64, proj_out 1536 + 48 = 2,148 values
    EXPECT_DOUBLE_EQ(cost.weight_bytes, 6.0 * ((20480 + 576) * 2 + 2148 * 4));
    // each tile-clip: latents 28·4 and pixels 28·48, fp32
    EXPECT_DOUBLE_EQ(cost.activation_bytes, 16.0 * 4 * (28 * 4 + 28 * 48));
    // e4m3 weights: a byte each, an fp32 scale and bias per channel
    const VideoDecodeCost f8 = video_decode_cost(c, 12, 3, 5, o, Device::cpu(), DType::kF8E4M3);
    EXPECT_DOUBLE_EQ(f8.weight_bytes, 6.0 * (20480 + 576 * 8 + 2148 * 4));
    EXPECT_DOUBLE_EQ(f8.flops(), cost.flops());
    // untiled: one call per clip over the whole 3×5 grid (n = 105, S = 108)
    const VideoDecodeCost whole =
        video_decode_cost(c, 12, 3, 5, {.tiling = false}, Device::cpu(), DType::kF16);
    EXPECT_EQ(whole.calls, 2);
    EXPECT_DOUBLE_EQ(whole.attention_flops, 2.0 * 4 * 108 * 108 * 32 * 2);
}

// The official decode at 1344×768×124 (spec §14): 196 tile-clips of 1797 rows, ≈ 1.9 PFLOP; on CUDA the
// 28 tiles of a clip go in 2 calls of 14.
TEST(VaeLayout, OfficialDecodeCost) {
    VideoVaeConfig c;
    c.latents_mean.assign(24, 0.0f), c.latents_std.assign(24, 1.0f);
    const VideoDecodeCost cost = video_decode_cost(c, 37, 48, 84, {}, Device::cuda(0), DType::kF16);
    EXPECT_EQ(cost.tile_clips, 196);
    EXPECT_EQ(cost.calls, 14);
    EXPECT_EQ(cost.rows, 196 * 1797);
    const double spec = 196.0 * (2.0 * 1797 * 2.416e9 + 4.0 * 1797 * 1797 * 2048 * 36);
    EXPECT_NEAR(cost.block_gemm_flops + cost.attention_flops, spec, 0.002 * spec);
    EXPECT_GT(cost.flops(), 1.85e15);
    EXPECT_LT(cost.flops(), 1.95e15);
}

TEST(AudioVae, TinyDecoderMatchesGolden) {
    auto vae = load_audio_vae(data("audio"), Device::cpu());
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    EXPECT_EQ(vae->config.hop_length(), 800);
    const Tensor lat = golden("audio_io.safetensors", "latents");
    auto wave = decode_audio(ops::Context::cpu(), *vae, lat);
    ASSERT_TRUE(wave.ok()) << wave.status().to_string();
    EXPECT_EQ(wave->shape(), (Shape{2, 4000}));
    expect_close(*wave, golden("audio_io.safetensors", "waveform"), 1e-4, 0.0, "audio waveform");
}

TEST(VideoVae, TinyDecoderSingleCallMatchesGolden) {
    auto vae = load_video_vae(data("video"), Device::cpu());
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    EXPECT_EQ(vae->config.patch, 4);
    EXPECT_EQ(vae->config.patch_t, 4);
    Tensor lat = golden("video_io.safetensors", "clip_latents"); // [1,24,2,2,3] normalized
    Tensor z = Tensor::host(Shape{24, 2, 2, 3}, DType::kF32);
    for (int64_t c = 0; c < 24; ++c)
        for (int64_t i = 0; i < 12; ++i)
            z.data_as<float>()[c * 12 + i] =
                lat.data_as<const float>()[c * 12 + i] * vae->config.latents_std[static_cast<size_t>(c)] +
                vae->config.latents_mean[static_cast<size_t>(c)];
    auto px = decode_tile_clip(ops::Context::cpu(), *vae, z);
    ASSERT_TRUE(px.ok()) << px.status().to_string();
    EXPECT_EQ(px->shape(), (Shape{3, 8, 8, 12}));
    expect_close(*px, golden("video_io.safetensors", "clip_sample"), 1e-4, 0.0, "clip sample");
}

TEST(VideoVae, TinyTiledChunkedDecodeMatchesGolden) {
    auto vae = load_video_vae(data("video"), Device::cpu());
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    const Tensor lat = golden("video_io.safetensors", "latents"); // [1,24,9,6,8]
    auto sample = decode_video_sample(ops::Context::cpu(), *vae, lat, {.tile = 16, .min_overlap = 4});
    ASSERT_TRUE(sample.ok()) << sample.status().to_string();
    EXPECT_EQ(sample->shape(), (Shape{3, 30, 24, 32}));
    expect_close(*sample, golden("video_io.safetensors", "sample"), 1e-4, 0.0, "tiled sample");
    Tensor rgb = sample_to_rgb8(*sample);
    const Tensor px = golden("video_io.safetensors", "pixels"); // [1,3,30,24,32] in [0,1]
    int off = 0;
    for (int64_t c = 0; c < 3; ++c)
        for (int64_t f = 0; f < 30; ++f)
            for (int64_t i = 0; i < 24 * 32; ++i) {
                const double want = px.data_as<const float>()[(c * 30 + f) * 768 + i] * 255.0;
                const double got = rgb.data_as<const uint8_t>()[(f * 768 + i) * 3 + c];
                if (std::fabs(got - want) > 0.5 + 1e-3) ++off;
            }
    EXPECT_EQ(off, 0) << "RGB8 pixels off by more than rounding";
    // Untiled decode differs from the tiled one (the released outputs are the tiled ones).
    auto untiled = decode_video_sample(ops::Context::cpu(), *vae, lat, {.tiling = false});
    ASSERT_TRUE(untiled.ok());
    auto a = to_f32_vector(*untiled).value(), b = to_f32_vector(*sample).value();
    double diff = 0.0;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    EXPECT_GT(diff, 1e-3);
}

TEST(VideoVae, Rgb8RoundsHalfToEvenAsNumpy) {
    // Samples whose x·std + mean lands exactly on k + 0.5 after ·255 (found by search around the target):
    // numpy's round() gives the even neighbour, std::lround would give k + 1 for every even k.
    static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f}, kStd[3] = {0.229f, 0.224f, 0.225f};
    std::vector<float> samples[3];
    std::vector<int> want[3];
    int even_k = 0;
    for (int ch = 0; ch < 3; ++ch)
        for (int k = 0; k < 255; ++k) {
            const float target = (static_cast<float>(k) + 0.5f) / 255.0f;
            float s = (target - kMean[ch]) / kStd[ch];
            for (int step = 0; step < 64; ++step) s = std::nextafter(s, -100.0f);
            for (int step = 0; step < 128; ++step, s = std::nextafter(s, 100.0f)) {
                const float v = std::min(1.0f, std::max(0.0f, s * kStd[ch] + kMean[ch]));
                if (v * 255.0f == static_cast<float>(k) + 0.5f) {
                    samples[ch].push_back(s);
                    want[ch].push_back(k % 2 == 0 ? k : k + 1);
                    even_k += k % 2 == 0;
                    break;
                }
            }
        }
    ASSERT_GT(even_k, 20) << "too few exact halves found";
    const int64_t n =
        static_cast<int64_t>(std::max({samples[0].size(), samples[1].size(), samples[2].size()}));
    Tensor sample = Tensor::host(Shape{3, 1, 1, n}, DType::kF32);
    for (int ch = 0; ch < 3; ++ch)
        for (int64_t i = 0; i < n; ++i)
            sample.data_as<float>()[ch * n + i] =
                i < static_cast<int64_t>(samples[ch].size()) ? samples[ch][static_cast<size_t>(i)] : 0.0f;
    Tensor rgb = sample_to_rgb8(sample);
    for (int ch = 0; ch < 3; ++ch)
        for (size_t i = 0; i < samples[ch].size(); ++i)
            EXPECT_EQ(rgb.data_as<uint8_t>()[i * 3 + static_cast<size_t>(ch)], want[ch][i])
                << "channel " << ch << " half " << want[ch][i];
}

// decode_video_frames with a frames sink: the parts it was handed, in order (each a host u8 [n, H, W, 3]).
std::vector<Tensor> streamed_frames(const ops::Context& ctx, const VideoVae& v, const Tensor& latents,
                                    VideoDecodeOptions o, const std::string& what) {
    std::vector<Tensor> parts;
    o.frames_sink = [&](Tensor part) -> Status {
        EXPECT_TRUE(part.device().is_cpu() && part.dtype() == DType::kU8 && part.rank() == 4) << what;
        parts.push_back(std::move(part));
        return ok_status();
    };
    auto none = decode_video_frames(ctx, v, latents, o);
    EXPECT_TRUE(none.ok()) << what << ": " << none.status().to_string();
    EXPECT_TRUE(none.ok() && !none->defined()) << what << ": the frames went to the sink";
    return parts;
}
std::vector<uint8_t> joined(const std::vector<Tensor>& parts) {
    std::vector<uint8_t> all;
    for (const Tensor& p : parts)
        all.insert(all.end(), p.data_as<const uint8_t>(), p.data_as<const uint8_t>() + p.nbytes());
    return all;
}

// decode_video_frames (what a request runs: the frames made where the sample was assembled, then one u8
// download) equals sample_to_rgb8(decode_video_sample) byte for byte: tiled and chunked with 2 × 2 tiles
// per clip, untiled, with host assembly, and on the golden tiny decoder; and handed to a frames sink clip
// by clip (more than one call where the decode is chunked). The CUDA pair is
// VaeCuda.FramesEqualSampleToRgb8.
TEST(VideoVae, DecodeVideoFramesEqualsSampleToRgb8) {
    const VideoVaeConfig config = tiny_video_vae_config({});
    auto vae = random_video_vae(ops::Context::cpu(), config, DType::kF32, 23);
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    Tensor lat = Tensor::host(Shape{1, config.latent_channels, 12, 3, 5}, DType::kF32);
    ASSERT_TRUE(ops::fill_uniform(ops::Context::cpu(), {.seed = 41, .bound = 2.0f}, lat).ok());
    auto expect_same = [&](const VideoVae& v, const Tensor& latents, const VideoDecodeOptions& o,
                           const std::string& what) -> size_t {
        auto sample = decode_video_sample(ops::Context::cpu(), v, latents, o);
        EXPECT_TRUE(sample.ok()) << what << ": " << sample.status().to_string();
        auto frames = decode_video_frames(ops::Context::cpu(), v, latents, o);
        EXPECT_TRUE(frames.ok()) << what << ": " << frames.status().to_string();
        if (!sample.ok() || !frames.ok()) return 0;
        const Tensor want = sample_to_rgb8(*sample);
        EXPECT_EQ(frames->shape(), want.shape()) << what;
        EXPECT_EQ(frames->dtype(), DType::kU8) << what;
        EXPECT_TRUE(frames->device().is_cpu()) << what;
        EXPECT_EQ(std::memcmp(frames->data(), want.data(), want.nbytes()), 0) << what;
        // a clamp was reached: the comparison covers more than mid-range values (tests/test_ops_frames.cpp
        // covers both clamps, ties and special values value by value)
        const uint8_t* d = frames->data_as<const uint8_t>();
        const int64_t n = frames->numel();
        EXPECT_TRUE(std::find(d, d + n, uint8_t{0}) != d + n || std::find(d, d + n, uint8_t{255}) != d + n)
            << what;
        // streamed to a sink clip by clip (what a request's MP4 encoder gets): the same bytes, in order
        const std::vector<Tensor> parts = streamed_frames(ops::Context::cpu(), v, latents, o, what);
        EXPECT_EQ(joined(parts), std::vector<uint8_t>(d, d + n)) << what;
        return parts.size();
    };
    EXPECT_GT(expect_same(*vae, lat, {.tile = 32, .min_overlap = 16}, "tiled, chunked"), 1u)
        << "one sink call per clip";
    expect_same(*vae, lat, {.tiling = false}, "untiled");
    expect_same(*vae, lat, {.tile = 32, .min_overlap = 16, .assemble_on_host = true},
                "assembled on the host");
    auto golden_vae = load_video_vae(data("video"), Device::cpu());
    ASSERT_TRUE(golden_vae.ok()) << golden_vae.status().to_string();
    expect_same(*golden_vae, golden("video_io.safetensors", "latents"), {.tile = 16, .min_overlap = 4},
                "golden tiny decoder");
    Tensor few = Tensor::host(Shape{1, 24, 2, 2, 2}, DType::kF32);
    EXPECT_FALSE(decode_video_frames(ops::Context::cpu(), *golden_vae, few).ok()) << "2 latent frames";
}

TEST(VideoVae, RejectsBadCheckpointsAndInputs) {
    const fs::path tmp = fs::path(H3_BINARY_DIR) / "test_vae_bad";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    fs::copy(data("video"), tmp, fs::copy_options::recursive);
    {
        std::ifstream in(tmp / "config.json");
        auto j = nlohmann::json::parse(in);
        j["decoder_num_layers"] = 3; // the file holds 2 blocks
        std::ofstream(tmp / "config.json") << j.dump();
    }
    auto r = load_video_vae(tmp.string(), Device::cpu());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().to_string().find("transformer_blocks.2"), std::string::npos)
        << r.status().to_string();
    auto vae = load_video_vae(data("video"), Device::cpu());
    ASSERT_TRUE(vae.ok());
    Tensor few = Tensor::host(Shape{1, 24, 2, 2, 2}, DType::kF32);
    EXPECT_FALSE(decode_video_sample(ops::Context::cpu(), *vae, few).ok()) << "2 latent frames make no clip";
    Tensor wrong = Tensor::host(Shape{1, 16, 7, 2, 2}, DType::kF32);
    EXPECT_FALSE(decode_video_sample(ops::Context::cpu(), *vae, wrong).ok());
    auto avae = load_audio_vae(data("audio"), Device::cpu());
    ASSERT_TRUE(avae.ok());
    EXPECT_FALSE(decode_audio(ops::Context::cpu(), *avae, Tensor::host(Shape{2, 31, 4}, DType::kF32)).ok());
}

// The half-precision block path (the CUDA default) on the CPU against the fp32 goldens, tiled + chunked,
// with 3 tiles per decoder call. f16 keeps 11 significant bits, bf16 8: each GEMM/attention input rounds
// once (relative 2^-11 / 2^-8), through 2 blocks and the final fp32 norm, so the stated tolerances are 3e-3
// (f16) and 2e-2 (bf16) of the signal's scale. Batching tiles must not change the fp32 result at all
// beyond summation order (1e-5).
TEST(VideoVae, HalfPrecisionAndTileBatchesMatchGolden) {
    const Tensor lat = golden("video_io.safetensors", "latents");
    const Tensor want = golden("video_io.safetensors", "sample");
    auto f32 = load_video_vae(data("video"), Device::cpu());
    ASSERT_TRUE(f32.ok()) << f32.status().to_string();
    EXPECT_EQ(f32->compute, DType::kF32) << "the CPU default must stay fp32";
    auto batched =
        decode_video_sample(ops::Context::cpu(), *f32, lat, {.tile = 16, .min_overlap = 4, .tile_batch = 3});
    ASSERT_TRUE(batched.ok()) << batched.status().to_string();
    expect_close(*batched, want, 1e-4, 0.0, "fp32, 3 tiles per call");
    for (auto [dt, tol] : {std::pair{DType::kF16, 3e-3}, std::pair{DType::kBF16, 2e-2}}) {
        auto vae = load_video_vae(data("video"), Device::cpu(), dt);
        ASSERT_TRUE(vae.ok()) << vae.status().to_string();
        EXPECT_EQ(vae->weights.blocks[0].q_w.dtype(), dt);
        EXPECT_EQ(vae->weights.proj_out_w.dtype(), DType::kF32);
        auto sample = decode_video_sample(ops::Context::cpu(), *vae, lat,
                                          {.tile = 16, .min_overlap = 4, .tile_batch = 3});
        ASSERT_TRUE(sample.ok()) << sample.status().to_string();
        expect_close(*sample, want, tol, 0.0, std::string("half path ") + dtype_name(dt));
        // and it is not secretly fp32: some difference from the fp32 result must show
        auto a = to_f32_vector(*sample).value(), b = to_f32_vector(*batched).value();
        double diff = 0.0;
        for (size_t i = 0; i < a.size(); ++i)
            diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
        EXPECT_GT(diff, 0.0) << dtype_name(dt);
    }
    EXPECT_FALSE(load_video_vae(data("video"), Device::cpu(), DType::kI32).ok());
}

// The fp8 decoder's e4m3 GEMM inputs over `blocks` block runs (layers × decoder calls): the norms (the
// first block's norm1 once a call, each block's norm2, the next block's norm1) and the SwiGLU write them
// fused (ops/fp8_fused.h); only the attention output is rounded inside its GEMM.
void expect_fp8_decoder_quantization(ops::ProvenanceRecord::Calls& calls, int64_t blocks) {
    const auto& quant = calls["job"]["fp8_quantization"];
    ASSERT_TRUE(quant.count("fused")) << "no fused fp8 quantization ran";
    EXPECT_EQ(quant.at("fused"), 3 * blocks);
    ASSERT_TRUE(quant.count("unfused"));
    EXPECT_EQ(quant.at("unfused"), blocks) << "a quantization besides the attention output's ran unfused";
}

// VideoVaePrecision::kFp8 on the CPU (the e4m3 reference of ops::gemm_fp8): the golden tiny decoder with
// its six block GEMMs in e4m3 (bf16 activations, attention and biases) against the exact decode (fp32 on
// the CPU), tiled and chunked, as RGB8 frames: PSNR >= 45 dB (measured 53.8 dB; the bf16 blocks alone give
// 65.1 dB). It is not the exact path in disguise: the frames differ, the decode's GEMM provenance
// names cpu-e4m3 for every block GEMM of every decoder call and no half-precision GEMM ran. The model
// store loads it for a placement of precision fp8; a decoder not in bf16 is refused.
TEST(VideoVae, Fp8BlocksWithinPsnrOfTheExactDecode) {
    const ops::Context cpu = ops::Context::cpu();
    const Tensor lat = golden("video_io.safetensors", "latents");
    auto exact = load_video_vae(data("video"), Device::cpu());
    ASSERT_TRUE(exact.ok()) << exact.status().to_string();
    EXPECT_FALSE(quantize_video_vae_fp8(cpu, *exact).ok()) << "an fp32 decoder";
    auto bf16 = load_video_vae(data("video"), Device::cpu(), DType::kBF16);
    ASSERT_TRUE(bf16.ok()) << bf16.status().to_string();
    auto f8 = load_video_vae(data("video"), Device::cpu(), DType::kBF16);
    ASSERT_TRUE(f8.ok()) << f8.status().to_string();
    ASSERT_TRUE(quantize_video_vae_fp8(cpu, *f8).ok());
    ASSERT_EQ(f8->weights.fp8.size(), f8->weights.blocks.size());
    EXPECT_EQ(f8->weights.fp8[0].ff2.data.dtype(), DType::kF8E4M3);
    EXPECT_FALSE(f8->weights.blocks[0].q_w.defined()) << "the bf16 copies are released";

    const VideoDecodeOptions o{.tile = 16, .min_overlap = 4};
    auto want = decode_video_frames(cpu, *exact, lat, o);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    auto half = decode_video_frames(cpu, *bf16, lat, o);
    ASSERT_TRUE(half.ok()) << half.status().to_string();
    ops::ProvenanceRecord record;
    Result<Tensor> got = Tensor();
    {
        const ops::ProvenanceScope scope(&record);
        got = decode_video_frames(cpu, *f8, lat, o);
    }
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->shape(), want->shape());
    const auto psnr = [&](const Tensor& a) {
        return pipeline::psnr_from_mse(
            pipeline::mse_u8(a.data_as<const uint8_t>(), want->data_as<const uint8_t>(), want->numel()));
    };
    const double p8 = psnr(*got), p16 = psnr(*half);
    std::printf("fp8 blocks vs exact: PSNR %.2f dB; bf16 blocks vs exact: %.2f dB\n", p8, p16);
    EXPECT_GE(p8, 45.0);
    EXPECT_TRUE(std::isfinite(p8)) << "identical frames: the e4m3 GEMMs did not run";
    EXPECT_LT(p8, p16) << "e4m3 GEMMs must cost more than bf16 rounding alone";
    // every block GEMM of every decoder call in e4m3 (one call per tile-clip on the CPU)
    const VideoDecodeCost cost =
        video_decode_cost(f8->config, lat.dim(2), lat.dim(3), lat.dim(4), o, Device::cpu(), DType::kF8E4M3);
    auto calls = record.calls();
    const auto& gemm = calls["job"]["gemm"];
    ASSERT_TRUE(gemm.count("cpu-e4m3")) << "no e4m3 GEMM ran";
    EXPECT_EQ(gemm.at("cpu-e4m3"), 6 * f8->config.num_layers * cost.calls);
    EXPECT_FALSE(gemm.count("cpu-bf16")) << "a block GEMM ran in bf16";
    EXPECT_FALSE(gemm.count("cpu-fp16"));
    expect_fp8_decoder_quantization(calls, f8->config.num_layers * cost.calls);

    // the model store's fp8 placement of the tiny checkpoint's decoder
    const fs::path tmp = fs::path(H3_BINARY_DIR) / "test_vae_fp8_store";
    fs::remove_all(tmp);
    ASSERT_TRUE(write_tiny_checkpoint({.dir = tmp.string(), .seed = 5}).ok());
    runtime::PlacementPlan plan = runtime::PlacementPlan::per_job(Device::cpu());
    plan[runtime::Component::kVideoDecoder].precision = runtime::ComputePrecision::kFp8;
    auto store = runtime::ModelStore::open(tmp.string(), plan);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto lease = (*store)->video_decoder();
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    EXPECT_EQ((*lease)->compute, DType::kBF16);
    EXPECT_EQ((*lease)->weights.fp8.size(), (*lease)->weights.blocks.size());
}

// The precisions' names: every one parses back to itself; a bad value is an error naming the field (the
// engine option's by default, or the one given) and listing the values.
TEST(VideoVaePrecision, ParsesEveryNameAndNamesTheFieldOfABadOne) {
    for (VideoVaePrecision p :
         {VideoVaePrecision::kExact, VideoVaePrecision::kBf16, VideoVaePrecision::kFp8}) {
        auto back = parse_video_vae_precision(video_vae_precision_name(p));
        ASSERT_TRUE(back.ok()) << video_vae_precision_name(p) << ": " << back.status().to_string();
        EXPECT_EQ(*back, p);
        EXPECT_EQ(runtime::video_vae_precision(runtime::placement_precision(p)), p);
    }
    EXPECT_STREQ(video_vae_precision_name(VideoVaePrecision::kBf16), "bf16");
    EXPECT_EQ(runtime::placement_precision(VideoVaePrecision::kExact), runtime::ComputePrecision::kDefault);
    EXPECT_STREQ(runtime::precision_name(runtime::placement_precision(VideoVaePrecision::kBf16)), "bf16");
    for (const std::string bad : {"BF16", "f16", "fp16", "", "bf16 "}) {
        auto r = parse_video_vae_precision(bad);
        ASSERT_FALSE(r.ok()) << "'" << bad << "'";
        EXPECT_EQ(r.status().field(), "vae_precision");
        EXPECT_NE(r.status().message().find("exact, bf16 or fp8"), std::string::npos) << r.status().message();
    }
    EXPECT_EQ(parse_video_vae_precision("bf8", "request.vae").status().field(), "request.vae");
    // the block dtype each loads with: exact keeps the device's default, bf16 and fp8 bf16 blocks
    EXPECT_EQ(video_vae_compute(VideoVaePrecision::kExact, Device::cpu()), DType::kF32);
    EXPECT_EQ(video_vae_compute(VideoVaePrecision::kExact, Device::cuda(0)), DType::kF16);
    for (Device d : {Device::cpu(), Device::cuda(0)}) {
        EXPECT_EQ(video_vae_compute(VideoVaePrecision::kBf16, d), DType::kBF16);
        EXPECT_EQ(video_vae_compute(VideoVaePrecision::kFp8, d), DType::kBF16);
    }
}

// VideoVaePrecision::kBf16 on the CPU: the golden tiny decoder (2 blocks) with its block weights, biases,
// activations, GEMMs and attention inputs in bf16 (each block tensor stored, so rounded, as bf16; the GEMMs
// and attention widen them to fp32 and round their output once) against the exact decode (fp32 on the CPU),
// tiled and chunked, as RGB8 frames: PSNR >= 55 dB (measured 65.1 dB; bf16 keeps 8 significant bits, one
// rounding per block tensor — the fp8 blocks give 53.8 dB). It is not the exact path in disguise: the frames
// differ and every block GEMM of every decoder call ran in bf16 (the provenance's cpu-bf16 count), none in
// the exact decode. The model store loads it for a placement of precision bf16 (plan `vae_decoder ... bf16`):
// bf16 blocks, nothing quantized.
TEST(VideoVae, Bf16BlocksWithinPsnrOfTheExactDecode) {
    const ops::Context cpu = ops::Context::cpu();
    const Tensor lat = golden("video_io.safetensors", "latents");
    auto exact = load_video_vae(data("video"), Device::cpu(),
                                video_vae_compute(VideoVaePrecision::kExact, Device::cpu()));
    ASSERT_TRUE(exact.ok()) << exact.status().to_string();
    auto bf16 = load_video_vae(data("video"), Device::cpu(),
                               video_vae_compute(VideoVaePrecision::kBf16, Device::cpu()));
    ASSERT_TRUE(bf16.ok()) << bf16.status().to_string();
    EXPECT_EQ(bf16->weights.blocks[0].ff1_w.dtype(), DType::kBF16);
    EXPECT_EQ(bf16->weights.blocks[0].ff1_b.dtype(), DType::kBF16);
    EXPECT_TRUE(bf16->weights.fp8.empty());

    const VideoDecodeOptions o{.tile = 16, .min_overlap = 4};
    ops::ProvenanceRecord exact_record, bf16_record;
    Result<Tensor> want = Tensor(), got = Tensor();
    {
        const ops::ProvenanceScope scope(&exact_record);
        want = decode_video_frames(cpu, *exact, lat, o);
    }
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    {
        const ops::ProvenanceScope scope(&bf16_record);
        got = decode_video_frames(cpu, *bf16, lat, o);
    }
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->shape(), want->shape());
    const double p = pipeline::psnr_from_mse(
        pipeline::mse_u8(got->data_as<const uint8_t>(), want->data_as<const uint8_t>(), want->numel()));
    std::printf("bf16 blocks vs exact (fp32 on the CPU): PSNR %.2f dB\n", p);
    EXPECT_GE(p, 55.0);
    EXPECT_TRUE(std::isfinite(p)) << "identical frames: the bf16 blocks did not run";
    const VideoDecodeCost cost =
        video_decode_cost(bf16->config, lat.dim(2), lat.dim(3), lat.dim(4), o, Device::cpu(), DType::kBF16);
    auto calls = bf16_record.calls();
    const auto& gemm = calls["job"]["gemm"];
    ASSERT_TRUE(gemm.count("cpu-bf16")) << "no bf16 GEMM ran";
    EXPECT_EQ(gemm.at("cpu-bf16"), 6 * bf16->config.num_layers * cost.calls);
    EXPECT_FALSE(gemm.count("cpu-e4m3"));
    EXPECT_FALSE(gemm.count("cpu-fp16"));
    auto exact_calls = exact_record.calls();
    EXPECT_FALSE(exact_calls["job"]["gemm"].count("cpu-bf16")) << "the exact decode ran a bf16 GEMM";

    // the model store's bf16 placement of the tiny checkpoint's decoder
    const fs::path tmp = fs::path(H3_BINARY_DIR) / "test_vae_bf16_store";
    fs::remove_all(tmp);
    ASSERT_TRUE(write_tiny_checkpoint({.dir = tmp.string(), .seed = 5}).ok());
    runtime::PlacementPlan plan = runtime::PlacementPlan::per_job(Device::cpu());
    plan[runtime::Component::kVideoDecoder].precision =
        runtime::placement_precision(VideoVaePrecision::kBf16);
    EXPECT_NE(plan.describe().find("vae_decoder per_job cpu bf16"), std::string::npos) << plan.describe();
    auto store = runtime::ModelStore::open(tmp.string(), plan);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto lease = (*store)->video_decoder();
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    EXPECT_EQ((*lease)->compute, DType::kBF16);
    EXPECT_EQ((*lease)->weights.blocks[0].q_w.dtype(), DType::kBF16);
    EXPECT_TRUE((*lease)->weights.fp8.empty()) << "bf16 quantizes nothing";
}

// make-tiny's vae/ and audio_vae/ load through the real loaders and decode latents of a small canvas:
// official patching (64×96 px from 4×6 latents, 17n+5 frames), finite, clamped, deterministic per seed.
TEST(TinyVae, MakeTinyDecodersLoadAndDecode) {
    const fs::path tmp = fs::path(H3_BINARY_DIR) / "test_vae_tiny";
    fs::remove_all(tmp);
    ASSERT_TRUE(write_tiny_checkpoint({.dir = tmp.string(), .seed = 5}).ok());
    const auto cfg = nlohmann::json::parse(std::ifstream(tmp / "vae" / "config.json"));
    EXPECT_EQ(cfg.at("_class_name"), "AutoencoderKLMiniMaxH3");
    EXPECT_EQ(cfg.at("latents_mean").size(), 24u);
    const auto acfg = nlohmann::json::parse(std::ifstream(tmp / "audio_vae" / "config.json"));
    EXPECT_EQ(acfg.at("_class_name"), "AutoencoderKLMiniMaxH3Audio");
    const auto index = nlohmann::json::parse(std::ifstream(tmp / "model_index.json"));
    EXPECT_EQ(index.at("vae").at(1), "AutoencoderKLMiniMaxH3");
    EXPECT_EQ(index.at("audio_vae").at(1), "AutoencoderKLMiniMaxH3Audio");

    auto vae = load_video_vae((tmp / "vae").string(), Device::cpu());
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    EXPECT_EQ(vae->config.patch, 16);
    EXPECT_EQ(vae->config.patch_t, 4);
    Tensor lat = Tensor::host(Shape{1, 24, 7, 4, 6}, DType::kF32);
    ASSERT_TRUE(ops::fill_uniform(ops::Context::cpu(), {.seed = 9, .bound = 1.5f}, lat).ok());
    auto sample = decode_video_sample(ops::Context::cpu(), *vae, lat);
    ASSERT_TRUE(sample.ok()) << sample.status().to_string();
    EXPECT_EQ(sample->shape(), (Shape{3, 22, 64, 96}));
    auto sv = to_f32_vector(*sample).value();
    double mx = 0.0, mn = 0.0;
    for (float v : sv) {
        ASSERT_TRUE(std::isfinite(v));
        mx = std::max(mx, static_cast<double>(v)), mn = std::min(mn, static_cast<double>(v));
    }
    EXPECT_GT(mx - mn, 1e-2) << "tiny video decoder output is constant";
    Tensor rgb = sample_to_rgb8(*sample);
    EXPECT_EQ(rgb.shape(), (Shape{22, 64, 96, 3}));

    auto avae = load_audio_vae((tmp / "audio_vae").string(), Device::cpu());
    ASSERT_TRUE(avae.ok()) << avae.status().to_string();
    EXPECT_EQ(avae->config.hop_length(), 800);
    Tensor alat = Tensor::host(Shape{2, 32, 5}, DType::kF32);
    ASSERT_TRUE(ops::fill_uniform(ops::Context::cpu(), {.seed = 10, .bound = 2.0f}, alat).ok());
    auto wave = decode_audio(ops::Context::cpu(), *avae, alat);
    ASSERT_TRUE(wave.ok()) << wave.status().to_string();
    EXPECT_EQ(wave->shape(), (Shape{2, 4000}));
    double amp = 0.0;
    const std::vector<float> wv = to_f32_vector(*wave).value();
    for (float v : wv) {
        ASSERT_TRUE(std::isfinite(v));
        ASSERT_LE(std::fabs(v), 1.0f);
        amp = std::max(amp, static_cast<double>(std::fabs(v)));
    }
    EXPECT_GT(amp, 1e-4) << "tiny audio decoder output is silent";

    // Same seed → identical weight files; another seed → different ones.
    const fs::path tmp2 = fs::path(H3_BINARY_DIR) / "test_vae_tiny2";
    fs::remove_all(tmp2);
    ASSERT_TRUE(write_tiny_video_vae((tmp2 / "a").string(), 5 + 11).ok());
    ASSERT_TRUE(write_tiny_video_vae((tmp2 / "b").string(), 6 + 11).ok());
    auto slurp = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string f = "diffusion_pytorch_model.safetensors";
    EXPECT_EQ(slurp(tmp / "vae" / f), slurp(tmp2 / "a" / f));
    EXPECT_NE(slurp(tmp / "vae" / f), slurp(tmp2 / "b" / f));
}

// CUDA decoders vs the goldens (the CPU path matches them to 1e-4): the same check on the device. cuBLASLt
// may run fp32 GEMMs with TF32-class inputs, so the device tolerance is 2e-3 relative to the signal scale.
TEST(VaeCuda, DecodersMatchGoldens) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto avae = load_audio_vae(data("audio"), ctx.device);
    ASSERT_TRUE(avae.ok()) << avae.status().to_string();
    auto wave = decode_audio(ctx, *avae, golden("audio_io.safetensors", "latents"));
    ASSERT_TRUE(wave.ok()) << wave.status().to_string();
    expect_close(*wave, golden("audio_io.safetensors", "waveform"), 2e-3, 0.0, "CUDA audio waveform");
    auto vvae = load_video_vae(data("video"), ctx.device);
    ASSERT_TRUE(vvae.ok()) << vvae.status().to_string();
    auto sample = decode_video_sample(ctx, *vvae, golden("video_io.safetensors", "latents"),
                                      {.tile = 16, .min_overlap = 4});
    ASSERT_TRUE(sample.ok()) << sample.status().to_string();
    expect_close(*sample, golden("video_io.safetensors", "sample"), 2e-3, 0.0, "CUDA tiled sample");
}

// On the device: decode_video_frames (frames made by the CUDA sample_to_rgb8, u8 download) equals the CPU
// conversion of the downloaded sample byte for byte; with host assembly too; and so do the frames handed
// to a sink clip by clip (the double-buffered download, core/chunk_download.h), also over 4 clips. A first
// decode warms the GEMM autotuner so both decodes run the same kernels.
TEST(VaeCuda, FramesEqualSampleToRgb8) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto vvae = load_video_vae(data("video"), ctx.device);
    ASSERT_TRUE(vvae.ok()) << vvae.status().to_string();
    const Tensor lat = golden("video_io.safetensors", "latents");
    for (bool on_host : {false, true}) {
        SCOPED_TRACE(on_host ? "assembled on the host" : "assembled on the device");
        const VideoDecodeOptions o{.tile = 16, .min_overlap = 4, .assemble_on_host = on_host};
        ASSERT_TRUE(decode_video_sample(ctx, *vvae, lat, o).ok()); // warm-up
        auto sample = decode_video_sample(ctx, *vvae, lat, o);
        ASSERT_TRUE(sample.ok()) << sample.status().to_string();
        auto frames = decode_video_frames(ctx, *vvae, lat, o);
        ASSERT_TRUE(frames.ok()) << frames.status().to_string();
        ASSERT_TRUE(frames->device().is_cpu());
        const Tensor want = sample_to_rgb8(*sample);
        ASSERT_EQ(frames->shape(), want.shape());
        EXPECT_EQ(std::memcmp(frames->data(), want.data(), want.nbytes()), 0);
        const uint8_t* w = want.data_as<const uint8_t>();
        EXPECT_EQ(joined(streamed_frames(ctx, *vvae, lat, o, "cuda")),
                  std::vector<uint8_t>(w, w + want.nbytes()))
            << "clip by clip to a sink";
    }
    // 4 clips (5 parts through the two download slots, each reused): the streamed frames equal the whole
    // decode's
    const VideoVaeConfig config = tiny_video_vae_config({});
    auto rvae = random_video_vae(ctx, config, DType::kF16, 23);
    ASSERT_TRUE(rvae.ok()) << rvae.status().to_string();
    Tensor lat4 = Tensor::host(Shape{1, config.latent_channels, 22, 3, 5}, DType::kF32);
    ASSERT_TRUE(ops::fill_uniform(ops::Context::cpu(), {.seed = 41, .bound = 2.0f}, lat4).ok());
    const VideoDecodeOptions o{.tile = 32, .min_overlap = 16};
    ASSERT_TRUE(decode_video_frames(ctx, *rvae, lat4, o).ok()); // warm-up: the autotuner's choices made
    auto whole = decode_video_frames(ctx, *rvae, lat4, o);
    ASSERT_TRUE(whole.ok()) << whole.status().to_string();
    const std::vector<Tensor> parts = streamed_frames(ctx, *rvae, lat4, o, "cuda, 4 clips");
    EXPECT_EQ(parts.size(), 5u);
    const uint8_t* w = whole->data_as<const uint8_t>();
    EXPECT_EQ(joined(parts), std::vector<uint8_t>(w, w + whole->nbytes()));
}

// A decoder of another precision on the device against the exact one: the golden tiny latents decoded (tiled
// and chunked) by the device's exact (f16) decoder and by `vae`, whose ops are recorded.
struct DeviceDecodeVsExact {
    double psnr = 0.0;                  // vae's RGB8 frames against exact's
    ops::ProvenanceRecord::Calls calls; // vae's decode's op implementations
    VideoDecodeCost cost;               // the decode's cost (calls), its block weights in `weight_dtype`
};
void decode_vs_exact_on_device(const ops::Context& ctx, const VideoVae& vae, DType weight_dtype,
                               DeviceDecodeVsExact& out) {
    const Tensor lat = golden("video_io.safetensors", "latents");
    auto exact =
        load_video_vae(data("video"), ctx.device, video_vae_compute(VideoVaePrecision::kExact, ctx.device));
    ASSERT_TRUE(exact.ok()) << exact.status().to_string();
    EXPECT_EQ(exact->compute, DType::kF16);
    const VideoDecodeOptions o{.tile = 16, .min_overlap = 4};
    auto want = decode_video_frames(ctx, *exact, lat, o);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    ops::ProvenanceRecord record;
    Result<Tensor> got = Tensor();
    {
        const ops::ProvenanceScope scope(&record);
        got = decode_video_frames(ctx, vae, lat, o);
    }
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->shape(), want->shape());
    out.psnr = pipeline::psnr_from_mse(
        pipeline::mse_u8(got->data_as<const uint8_t>(), want->data_as<const uint8_t>(), want->numel()));
    out.calls = record.calls();
    out.cost = video_decode_cost(vae.config, lat.dim(2), lat.dim(3), lat.dim(4), o, ctx.device, weight_dtype);
}

// The fp8 decoder on the device (cuBLASLt e4m3 GEMMs; sm_89+): the golden tiny decoder's frames within the
// CPU test's bound (45 dB) of the device's exact (f16) decode, every block GEMM cublaslt-e4m3, the norms and
// the SwiGLU quantizing fused.
TEST(VaeCuda, Fp8DecodeWithinPsnrOfTheExactDecode) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto f8 = load_video_vae(data("video"), ctx.device, DType::kBF16);
    ASSERT_TRUE(f8.ok()) << f8.status().to_string();
    ASSERT_TRUE(quantize_video_vae_fp8(ctx, *f8).ok());
    DeviceDecodeVsExact r;
    decode_vs_exact_on_device(ctx, *f8, DType::kF8E4M3, r);
    if (HasFatalFailure()) return;
    std::printf("CUDA fp8 blocks vs CUDA exact: PSNR %.2f dB\n", r.psnr);
    EXPECT_GE(r.psnr, 45.0);
    EXPECT_TRUE(std::isfinite(r.psnr)) << "identical frames: the e4m3 GEMMs did not run";
    const auto& gemm = r.calls["job"]["gemm"];
    ASSERT_TRUE(gemm.count("cublaslt-e4m3")) << "no e4m3 GEMM ran";
    EXPECT_EQ(gemm.at("cublaslt-e4m3"), 6 * f8->config.num_layers * r.cost.calls);
    expect_fp8_decoder_quantization(r.calls, f8->config.num_layers * r.cost.calls);
}

// The bf16 decoder on the device (VideoVaePrecision::kBf16: cuBLASLt bf16 GEMMs, bf16 attention): the golden
// tiny decoder's frames within the CPU test's bound (55 dB) of the device's exact (f16) decode, every block
// GEMM cublaslt-bf16 and none in f16; the attention implementations it ran are printed (the official shape's
// are in bench vae's JSON: sm90a-wgmma-bf16 on an H100 where the kernel fits).
TEST(VaeCuda, Bf16DecodeWithinPsnrOfTheExactDecode) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto bf16 =
        load_video_vae(data("video"), ctx.device, video_vae_compute(VideoVaePrecision::kBf16, ctx.device));
    ASSERT_TRUE(bf16.ok()) << bf16.status().to_string();
    DeviceDecodeVsExact r;
    decode_vs_exact_on_device(ctx, *bf16, DType::kBF16, r);
    if (HasFatalFailure()) return;
    std::printf("CUDA bf16 blocks vs CUDA exact (f16): PSNR %.2f dB\n", r.psnr);
    EXPECT_GE(r.psnr, 55.0);
    EXPECT_TRUE(std::isfinite(r.psnr)) << "identical frames: the bf16 blocks did not run";
    const auto& gemm = r.calls["job"]["gemm"];
    ASSERT_TRUE(gemm.count("cublaslt-bf16")) << "no bf16 GEMM ran";
    EXPECT_EQ(gemm.at("cublaslt-bf16"), 6 * bf16->config.num_layers * r.cost.calls);
    EXPECT_FALSE(gemm.count("cublaslt-fp16")) << "a block GEMM ran in f16";
    for (const auto& [impl, n] : r.calls["job"]["dense_attention"])
        std::printf("  bf16 decode attention: %s x %lld\n", impl.c_str(), static_cast<long long>(n));
}

// H3_VAE_BENCH=1: official-size decoders with random weights on the device, timed (not a golden check).
TEST(VaeCuda, OfficialSizeTiming) {
    if (cuda::device_count() == 0 || !std::getenv("H3_VAE_BENCH"))
        GTEST_SKIP() << "set H3_VAE_BENCH=1 on a GPU";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok());
    const ops::Context& ctx = (*session)->context();
    VideoVae vae;
    vae.device = ctx.device;
    vae.config.latents_mean.assign(24, 0.0f);
    vae.config.latents_std.assign(24, 1.0f);
    uint64_t seed = 1;
    auto make = [&](const Shape& s, float bound, float offset) {
        Tensor t = Tensor::empty(s, DType::kF32, ctx.device).value();
        EXPECT_TRUE(ops::fill_uniform(ctx, {.seed = seed++, .bound = bound, .offset = offset}, t).ok());
        return t;
    };
    const VideoVaeConfig& c = vae.config;
    const int64_t d = c.dim(), ff = c.ffn_dim();
    VideoVaeWeights& w = vae.weights;
    w.pq_w = make(Shape{24, 24}, 0.2f, 0.0f);
    w.pq_b = make(Shape{24}, 0.01f, 0.0f);
    w.proj_in_w = make(Shape{d, 24}, 0.2f, 0.0f);
    w.proj_in_b = make(Shape{d}, 0.01f, 0.0f);
    w.registers = make(Shape{c.num_register_tokens, d}, 1.0f, 0.0f);
    for (int i = 0; i < c.num_layers; ++i) {
        VideoVaeBlock b;
        b.norm1 = make(Shape{d}, 0.1f, 1.0f);
        b.norm2 = make(Shape{d}, 0.1f, 1.0f);
        for (Tensor* t : {&b.q_w, &b.k_w, &b.v_w, &b.o_w}) *t = make(Shape{d, d}, 0.02f, 0.0f);
        for (Tensor* t : {&b.q_b, &b.k_b, &b.v_b, &b.o_b, &b.ff2_b}) *t = make(Shape{d}, 0.01f, 0.0f);
        b.ff1_w = make(Shape{2 * ff, d}, 0.02f, 0.0f);
        b.ff1_b = make(Shape{2 * ff}, 0.01f, 0.0f);
        b.ff2_w = make(Shape{d, ff}, 0.01f, 0.0f);
        b.scale1 = make(Shape{1, d}, 0.1f, 0.0f);
        b.scale2 = make(Shape{1, d}, 0.1f, 0.0f);
        w.blocks.push_back(b);
    }
    w.norm_out_w = make(Shape{d}, 0.1f, 1.0f);
    w.norm_out_b = make(Shape{d}, 0.01f, 0.0f);
    w.proj_out_w = make(Shape{c.patch_dim(), d}, 0.02f, 0.0f);
    w.proj_out_b = make(Shape{c.patch_dim()}, 0.01f, 0.0f);
    Tensor z = Tensor::host(Shape{24, 7, 16, 16}, DType::kF32);
    for (int64_t i = 0; i < z.numel(); ++i) z.data_as<float>()[i] = std::sin(0.37f * static_cast<float>(i));
    ASSERT_TRUE(decode_tile_clip(ctx, vae, z).ok()); // warm-up (cuBLASLt/cuDNN plans)
    const auto t0 = std::chrono::steady_clock::now();
    const int reps = 3;
    for (int r = 0; r < reps; ++r) ASSERT_TRUE(decode_tile_clip(ctx, vae, z).ok());
    const double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("{\"video_tile_clip_seconds\": %.4f, \"tile_clips_768x1344x124\": 196, "
                "\"video_decode_estimate_seconds\": %.2f}\n",
                per, per * 196);
    AudioVae avae;
    avae.device = ctx.device;
    avae.config.latents_mean.assign(32, 0.0f);
    avae.config.latents_std.assign(32, 1.0f);
    const AudioVaeConfig& ac = avae.config;
    AudioVaeWeights& aw = avae.weights;
    aw.filter = host_tensor_from(kaiser_sinc_filter(0.25, 0.3, 12), Shape{12}).to(ctx.device).value();
    aw.in_proj = {make(Shape{ac.latent_dim, 32, 1}, 0.1f, 0.0f), make(Shape{ac.latent_dim}, 0.01f, 0.0f)};
    aw.conv_pre = {make(Shape{ac.decoder_dim, ac.latent_dim, 7}, 0.01f, 0.0f),
                   make(Shape{ac.decoder_dim}, 0.01f, 0.0f)};
    int64_t ch = ac.decoder_dim;
    for (size_t i = 0; i < ac.decoder_rates.size(); ++i) {
        aw.ups.push_back({make(Shape{ch, ch / 2, ac.decoder_kernel_sizes[i]}, 0.02f, 0.0f),
                          make(Shape{ch / 2}, 0.01f, 0.0f)});
        ch /= 2;
        for (size_t j = 0; j < 3; ++j) {
            AmpBlockWeights b;
            b.kernel = ac.resblock_kernel_sizes[j];
            b.dilations = ac.resblock_dilation_sizes[j];
            for (size_t m = 0; m < 3; ++m) {
                b.convs1.push_back(
                    {make(Shape{ch, ch, b.kernel}, 0.02f, 0.0f), make(Shape{ch}, 0.01f, 0.0f)});
                b.convs2.push_back(
                    {make(Shape{ch, ch, b.kernel}, 0.02f, 0.0f), make(Shape{ch}, 0.01f, 0.0f)});
            }
            for (size_t a = 0; a < 6; ++a)
                b.acts.push_back({make(Shape{ch}, 0.3f, 0.0f), make(Shape{ch}, 0.3f, 0.0f)});
            aw.blocks.push_back(b);
        }
    }
    aw.act_post = {make(Shape{ch}, 0.3f, 0.0f), make(Shape{ch}, 0.3f, 0.0f)};
    aw.conv_post = {make(Shape{1, ch, 7}, 0.1f, 0.0f), Tensor()};
    Tensor alat = Tensor::host(Shape{2, 32, 207}, DType::kF32);
    ASSERT_TRUE(decode_audio(ctx, avae, alat).ok());
    const auto t1 = std::chrono::steady_clock::now();
    auto wave = decode_audio(ctx, avae, alat);
    ASSERT_TRUE(wave.ok()) << wave.status().to_string();
    const double as = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::printf("{\"audio_decode_seconds_A207_stereo\": %.4f, \"samples\": %lld}\n", as,
                static_cast<long long>(wave->dim(1)));
}

} // namespace
} // namespace h3::model
