// Audio VAE encoder (model/audio_vae/audio_vae_encoder.h) against goldens from
// tools/reference/make_audio_encoder_goldens.py (a PyTorch reference written from the spec §10 and the
// diffusers module; tiny F16-stored weights, official rates): the posterior mean of a stereo clip whose
// length is not a multiple of the hop, the ref2va rows, other head counts (adaptive pooling down, identity
// and up), a single exact hop. Tolerance: rel-RMS < 1e-5 — fp32 on both sides with different summation orders
// (OpenBLAS vs torch convolutions and GEMMs, the pooling as one GEMM instead of a mean and a pool). Also: the
// rows' layout and normalization, padding to the hop, error messages, make-tiny's encoder, and the ops the
// encoder added (snake, geglu, transpose) against naive loops. With a CUDA device the goldens and the ops run
// on the GPU too.
#include "cli/device_setup.h"
#include "core/cuda_api.h"
#include "golden_compare.h"
#include "io/safetensors.h"
#include "model/audio_vae/audio_vae_encoder.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/tiny/tiny_vae.h"
#include "ops/ops.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

namespace h3::model {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(H3_SOURCE_DIR) + "/tests/data/vae/audio_encoder";
const std::string kDir = kData + "/model"; // the tiny checkpoint

Tensor io(const std::string& name) {
    auto f = io::SafetensorsFile::open(kData + "/io.safetensors");
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    auto t = f->tensor(name);
    EXPECT_TRUE(t.ok()) << name << ": " << t.status().to_string();
    return t->to_dtype(DType::kF32).value(); // a writable host copy
}

void expect_close(const Tensor& got, const Tensor& want, double rel_rms, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    const auto d = testing_support::compare(got, want);
    EXPECT_LT(d.rel_rms, rel_rms) << what << ": rel-RMS " << d.rel_rms << ", max |Δ| " << d.max_abs
                                  << " (max |want| " << d.ref_max << ")";
    std::printf("%s: rel-RMS %.3g, max |got - golden| %.3g (max |golden| %.3g)\n", what.c_str(), d.rel_rms,
                d.max_abs, d.ref_max);
}

// A copy of the golden checkpoint in the build tree, to edit.
fs::path scratch_copy(const std::string& name) {
    const fs::path tmp = fs::path(H3_BINARY_DIR) / name;
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    fs::copy(kDir, tmp, fs::copy_options::recursive);
    return tmp;
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& f) {
    auto j = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    f(j);
    std::ofstream(dir / "config.json") << j.dump();
}

// Rewrites the checkpoint without `drop` (and with every other tensor as it was).
void drop_tensor(const fs::path& dir, const std::string& drop) {
    const std::string file = (dir / "diffusion_pytorch_model.safetensors").string();
    std::vector<io::NamedTensor> kept;
    {
        auto f = io::SafetensorsFile::open(file);
        ASSERT_TRUE(f.ok());
        for (const io::TensorInfo& info : f->tensors())
            if (info.name != drop)
                kept.push_back({info.name, f->tensor(info.name)->to_dtype(DType::kF32).value()});
    }
    ASSERT_TRUE(io::write_safetensors(file, kept).ok());
}

void check_goldens(const ops::Context& ctx, const AudioVaeEncoder& enc, double rel, const std::string& tag) {
    auto mean = encode_audio_mean(ctx, enc, io("stereo"));
    ASSERT_TRUE(mean.ok()) << mean.status().to_string();
    expect_close(*mean, io("mean"), rel, tag + " stereo mean [2, 32, 7]");
    auto rows = encode_reference_audio_rows(ctx, enc, enc.config, io("stereo"));
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    expect_close(*rows, io("rows"), rel, tag + " ref2va rows [14, 32]");
    auto mono = encode_audio_mean(ctx, enc, io("mono"));
    ASSERT_TRUE(mono.ok()) << mono.status().to_string();
    expect_close(*mono, io("mono_mean"), rel, tag + " one hop, mono [1, 32, 1]");
}

TEST(AudioVaeEncoder, MatchesGoldensOnCpu) {
    auto enc = load_audio_vae_encoder(kDir, Device::cpu());
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    EXPECT_EQ(enc->weights.blocks.size(), 5u);
    EXPECT_EQ(enc->weights.blocks[4].stride, 5);
    EXPECT_EQ(enc->weights.blocks[4].down.w.shape(), (Shape{32, 16, 10}));
    EXPECT_EQ(enc->weights.pre.pool.shape(), (Shape{32, 96}));
    check_goldens(ops::Context::cpu(), *enc, 1e-5, "cpu");
}

// The same weights with 1, 3 and 4 heads: the head mean and the adaptive pool (96 → 32 in bins of 3; 32 → 32;
// 24 → 32 with bins of one element).
TEST(AudioVaeEncoder, HeadCountsAndPooling) {
    const fs::path tmp = scratch_copy("test_audio_encoder_heads");
    for (int heads : {1, 3, 4}) {
        edit_config(tmp, [&](nlohmann::json& j) { j["num_attention_heads"] = heads; });
        auto enc = load_audio_vae_encoder(tmp.string(), Device::cpu());
        ASSERT_TRUE(enc.ok()) << enc.status().to_string();
        auto mean = encode_audio_mean(ops::Context::cpu(), *enc, io("stereo"));
        ASSERT_TRUE(mean.ok()) << mean.status().to_string();
        expect_close(*mean, io("mean_heads" + std::to_string(heads)), 1e-5, std::to_string(heads) + " heads");
    }
}

// rows[c·A + t][k] = (mean[c][k][t] − latents_mean[k]) / latents_std[k], left channel first; swapping the
// channels swaps the row blocks.
TEST(AudioVaeEncoder, ReferenceRowsLayoutAndNormalization) {
    auto enc = load_audio_vae_encoder(kDir, Device::cpu());
    ASSERT_TRUE(enc.ok());
    const ops::Context cpu = ops::Context::cpu();
    const Tensor stereo = io("stereo");
    auto mean = encode_audio_mean(cpu, *enc, stereo);
    auto rows = encode_reference_audio_rows(cpu, *enc, enc->config, stereo);
    ASSERT_TRUE(mean.ok() && rows.ok());
    const int64_t a = 7, o = 32;
    ASSERT_EQ(rows->shape(), (Shape{2 * a, o}));
    const AudioVaeConfig& c = enc->config;
    for (int64_t ch = 0; ch < 2; ++ch)
        for (int64_t t = 0; t < a; ++t)
            for (int64_t k = 0; k < o; ++k) {
                const float z = mean->data_as<const float>()[(ch * o + k) * a + t];
                const float want = (z - c.latents_mean[size_t(k)]) / c.latents_std[size_t(k)];
                ASSERT_EQ(rows->data_as<const float>()[(ch * a + t) * o + k], want)
                    << ch << " " << t << " " << k;
            }
    // Another config's statistics are the ones applied.
    AudioVaeConfig other = c;
    other.latents_mean.assign(32, 0.0f);
    other.latents_std.assign(32, 1.0f);
    auto raw = encode_reference_audio_rows(cpu, *enc, other, stereo);
    ASSERT_TRUE(raw.ok());
    EXPECT_EQ(raw->data_as<const float>()[a * o + 5], mean->data_as<const float>()[(o + 5) * a + 0]);
    // Swapped channels → swapped row blocks (the channels are independent batch items).
    Tensor swapped = Tensor::host(stereo.shape(), DType::kF32);
    const int64_t n = stereo.dim(1);
    std::memcpy(swapped.data_as<float>(), stereo.data_as<const float>() + n, size_t(n) * sizeof(float));
    std::memcpy(swapped.data_as<float>() + n, stereo.data_as<const float>(), size_t(n) * sizeof(float));
    auto rs = encode_reference_audio_rows(cpu, *enc, c, swapped);
    ASSERT_TRUE(rs.ok());
    for (int64_t i = 0; i < a * o; ++i) {
        ASSERT_EQ(rs->data_as<const float>()[i], rows->data_as<const float>()[a * o + i]);
        ASSERT_EQ(rs->data_as<const float>()[a * o + i], rows->data_as<const float>()[i]);
    }
}

// A = ceil(N / 800) latents; the padding is zeros on the right: N = 5133 gives exactly what the explicitly
// zero-padded 5600 samples give, and a longer tail changes the last latents.
TEST(AudioVaeEncoder, PadsToTheHop) {
    auto enc = load_audio_vae_encoder(kDir, Device::cpu());
    ASSERT_TRUE(enc.ok());
    const ops::Context cpu = ops::Context::cpu();
    for (int64_t n : {1, 799, 800, 801, 1601}) {
        Tensor w = Tensor::host(Shape{1, n}, DType::kF32);
        for (int64_t i = 0; i < n; ++i) w.data_as<float>()[i] = 0.3f * std::sin(0.05f * float(i));
        auto m = encode_audio_mean(cpu, *enc, w);
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        EXPECT_EQ(m->shape(), (Shape{1, 32, (n + 799) / 800})) << n;
        const std::vector<float> mv = to_f32_vector(*m).value();
        for (float v : mv) ASSERT_TRUE(std::isfinite(v));
    }
    const Tensor stereo = io("stereo");
    const int64_t n = stereo.dim(1);
    Tensor padded = Tensor::host(Shape{2, 5600}, DType::kF32);
    for (int c = 0; c < 2; ++c)
        std::memcpy(padded.data_as<float>() + c * 5600, stereo.data_as<const float>() + c * n,
                    size_t(n) * sizeof(float));
    auto a = encode_audio_mean(cpu, *enc, stereo);
    auto b = encode_audio_mean(cpu, *enc, padded);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(testing_support::compare(*a, *b).max_abs, 0.0);
    for (int c = 0; c < 2; ++c)
        for (int64_t i = n; i < 5600; ++i) padded.data_as<float>()[c * 5600 + i] = 0.5f;
    auto d = encode_audio_mean(cpu, *enc, padded);
    ASSERT_TRUE(d.ok());
    EXPECT_GT(testing_support::compare(*d, *a).max_abs, 1e-3) << "the padded samples must be zeros";
    // A mono encode is channel 0 of the stereo encode.
    auto left = encode_audio_mean(cpu, *enc, stereo.slice(0, 0, 1));
    ASSERT_TRUE(left.ok()) << left.status().to_string();
    for (int64_t i = 0; i < left->numel(); ++i)
        ASSERT_EQ(left->data_as<const float>()[i], a->data_as<const float>()[i]) << i;
}

TEST(AudioVaeEncoder, RejectsBadCheckpointsAndInputs) {
    // A decoder-only checkpoint.
    const std::string dec = std::string(H3_SOURCE_DIR) + "/tests/data/vae/audio";
    auto r = load_audio_vae_encoder(dec, Device::cpu());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
    EXPECT_EQ(r.status().message(),
              "audio VAE " + dec + " has no encoder weights (encoder.*): ref2va audio references need them");

    const fs::path tmp = scratch_copy("test_audio_encoder_bad");
    drop_tensor(tmp, "pre_block.mlp.w2.weight");
    r = load_audio_vae_encoder(tmp.string(), Device::cpu());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("lacks encoder tensor 'pre_block.mlp.w2.weight'"), std::string::npos)
        << r.status().to_string();

    const fs::path tmp2 = scratch_copy("test_audio_encoder_bad2");
    edit_config(tmp2, [](nlohmann::json& j) { j["encoder_dim"] = 2; });
    r = load_audio_vae_encoder(tmp2.string(), Device::cpu());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("'encoder.block.0.weight_g' has shape [1, 1, 1], the config implies "
                                        "[2, 1, 1]"),
              std::string::npos)
        << r.status().to_string();
    edit_config(tmp2, [](nlohmann::json& j) {
        j["encoder_dim"] = 1;
        j["num_attention_heads"] = 5;
    });
    r = load_audio_vae_encoder(tmp2.string(), Device::cpu());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("num_attention_heads 5"), std::string::npos)
        << r.status().to_string();
    edit_config(tmp2, [](nlohmann::json& j) {
        j["num_attention_heads"] = 2;
        j["encoder_rates"] = {2, 4, 4, 5, 4};
    });
    r = load_audio_vae_encoder(tmp2.string(), Device::cpu());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("encoder_rates multiply to 640"), std::string::npos)
        << r.status().to_string();

    // A checkpoint without the zero_k_bias buffer encodes the same (it is zero either way).
    const fs::path tmp3 = scratch_copy("test_audio_encoder_nokbias");
    drop_tensor(tmp3, "pre_block.attn.zero_k_bias");
    auto nk = load_audio_vae_encoder(tmp3.string(), Device::cpu());
    ASSERT_TRUE(nk.ok()) << nk.status().to_string();
    auto m = encode_audio_mean(ops::Context::cpu(), *nk, io("mono"));
    ASSERT_TRUE(m.ok());
    expect_close(*m, io("mono_mean"), 1e-5, "without zero_k_bias");

    auto enc = load_audio_vae_encoder(kDir, Device::cpu());
    ASSERT_TRUE(enc.ok());
    const ops::Context cpu = ops::Context::cpu();
    auto e = encode_audio_mean(cpu, *enc, Tensor::host(Shape{800}, DType::kF32));
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("waveform must be [channels = 1 or 2, samples >= 1], got f32[800]"),
              std::string::npos)
        << e.status().to_string();
    EXPECT_FALSE(encode_audio_mean(cpu, *enc, Tensor::host(Shape{3, 800}, DType::kF32)).ok()) << "3 channels";
    EXPECT_FALSE(encode_audio_mean(cpu, *enc, Tensor::host(Shape{2, 0}, DType::kF32)).ok()) << "no samples";
    EXPECT_FALSE(encode_audio_mean(cpu, *enc, Tensor::host(Shape{1, 800}, DType::kI32)).ok()) << "ints";
    auto rr = encode_reference_audio_rows(cpu, *enc, enc->config, Tensor::host(Shape{1, 800}, DType::kF32));
    ASSERT_FALSE(rr.ok());
    EXPECT_NE(rr.status().message().find("must be stereo [2, samples]"), std::string::npos);
    AudioVaeConfig short_stats = enc->config;
    short_stats.latents_std.resize(31);
    EXPECT_FALSE(encode_reference_audio_rows(cpu, *enc, short_stats, io("stereo")).ok());
}

// make-tiny's audio_vae/ carries an encoder of the official structure (rates 2·4·4·5·5, encoder_dim 4,
// latent_dim 16, 2 heads): it loads through the real loader, encodes one second of stereo to 40 latents, and
// the decoder still loads from the same folder.
TEST(AudioVaeEncoder, MakeTinyEncoder) {
    const fs::path tmp = fs::path(H3_BINARY_DIR) / "test_audio_encoder_tiny";
    fs::remove_all(tmp);
    ASSERT_TRUE(write_tiny_checkpoint({.dir = tmp.string(), .seed = 3}).ok());
    const auto cfg = nlohmann::json::parse(std::ifstream(tmp / "audio_vae" / "config.json"));
    EXPECT_EQ(cfg.at("encoder_dim"), 4);
    EXPECT_EQ(cfg.at("num_attention_heads"), 2);
    EXPECT_EQ(cfg.at("encoder_rates"), nlohmann::json({2, 4, 4, 5, 5}));
    auto enc = load_audio_vae_encoder((tmp / "audio_vae").string(), Device::cpu());
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    EXPECT_EQ(enc->weights.blocks.back().down.w.shape(), (Shape{128, 64, 10}));
    auto dec = load_audio_vae((tmp / "audio_vae").string(), Device::cpu());
    ASSERT_TRUE(dec.ok()) << dec.status().to_string();
    Tensor stereo = Tensor::host(Shape{2, 32000}, DType::kF32);
    for (int64_t i = 0; i < stereo.numel(); ++i)
        stereo.data_as<float>()[i] = 0.4f * std::sin(0.013f * float(i % 32000) * (1.0f + float(i / 32000)));
    auto rows = encode_reference_audio_rows(ops::Context::cpu(), *enc, enc->config, stereo);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    EXPECT_EQ(rows->shape(), (Shape{80, 32}));
    const auto v = to_f32_vector(*rows).value();
    double ss = 0.0;
    for (float x : v) {
        ASSERT_TRUE(std::isfinite(x));
        ss += double(x) * x;
    }
    EXPECT_GT(ss, 0.0);
    // Deterministic from the seed: a second make-tiny writes the same encoder.
    const fs::path tmp2 = fs::path(H3_BINARY_DIR) / "test_audio_encoder_tiny2";
    fs::remove_all(tmp2);
    ASSERT_TRUE(write_tiny_audio_vae(tmp2.string(), 3 + 12).ok());
    auto enc2 = load_audio_vae_encoder(tmp2.string(), Device::cpu());
    ASSERT_TRUE(enc2.ok());
    auto rows2 = encode_reference_audio_rows(ops::Context::cpu(), *enc2, enc2->config, stereo);
    ASSERT_TRUE(rows2.ok());
    EXPECT_EQ(testing_support::compare(*rows2, *rows).max_abs, 0.0);
}

// ---- the ops the encoder added, against naive loops ------------------------------------------------------

Tensor random_host(const Shape& s, uint32_t seed, float lo, float hi) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    Tensor t = Tensor::host(s, DType::kF32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = dist(gen);
    return t;
}

double max_err(const Tensor& got, const std::vector<double>& want) {
    const auto g = to_f32_vector(got).value();
    EXPECT_EQ(g.size(), want.size());
    double m = 0.0;
    for (size_t i = 0; i < g.size(); ++i)
        m = std::max(m, std::isfinite(g[i]) ? std::fabs(g[i] - want[i]) : INFINITY);
    return m;
}

TEST(AudioEncoderOps, SnakeGegluTransposeMatchNaiveLoops) {
    const ops::Context cpu = ops::Context::cpu();
    // snake: x + sin²(αx)/(α + 1e-9), α in linear space (negative and tiny α included).
    Tensor x = random_host(Shape{2, 5, 37}, 1, -3.0f, 3.0f), a = random_host(Shape{5}, 2, 0.2f, 2.0f);
    a.data_as<float>()[3] = -0.7f;
    Tensor y = Tensor::host(x.shape(), DType::kF32);
    ASSERT_TRUE(ops::snake(cpu, x, a, y).ok());
    std::vector<double> want;
    for (int64_t i = 0; i < x.numel(); ++i) {
        const double al = a.data_as<const float>()[(i / 37) % 5], v = x.data_as<const float>()[i];
        want.push_back(v + std::pow(std::sin(al * v), 2) / (al + 1e-9));
    }
    EXPECT_LT(max_err(y, want), 2e-6);
    ASSERT_TRUE(ops::snake(cpu, x, a, x).ok()) << "in place";
    EXPECT_LT(max_err(x, want), 2e-6);
    EXPECT_FALSE(ops::snake(cpu, x, Tensor::host(Shape{4}, DType::kF32), y).ok()) << "alpha per channel";

    // geglu: [value | gate] → value · gelu_tanh(gate) (and the erf form).
    Tensor h = random_host(Shape{3, 14}, 3, -4.0f, 4.0f);
    for (bool tanh_form : {true, false}) {
        Tensor g = Tensor::host(Shape{3, 7}, DType::kF32);
        ASSERT_TRUE(ops::geglu(cpu, {.tanh = tanh_form}, h, g).ok());
        std::vector<double> wg;
        for (int64_t r = 0; r < 3; ++r)
            for (int64_t c = 0; c < 7; ++c) {
                const double v = h.data_as<const float>()[r * 14 + c],
                             q = h.data_as<const float>()[r * 14 + 7 + c];
                const double gl =
                    tanh_form ? 0.5 * q * (1 + std::tanh(std::sqrt(2 / M_PI) * (q + 0.044715 * q * q * q)))
                              : 0.5 * q * (1 + std::erf(q / std::sqrt(2.0)));
                wg.push_back(v * gl);
            }
        EXPECT_LT(max_err(g, wg), 5e-6) << (tanh_form ? "tanh" : "erf");
    }
    Tensor g_bad = Tensor::host(Shape{3, 6}, DType::kF32);
    EXPECT_FALSE(ops::geglu(cpu, {}, h, g_bad).ok());

    // transpose: [B, M, N] → [B, N, M] and [M, N] → [N, M], bit copies of any dtype.
    for (const Shape& s : {Shape{3, 37, 70}, Shape{1, 1, 5}, Shape{45, 33}}) {
        Tensor t = random_host(s, 4, -1.0f, 1.0f);
        const bool b3 = s.rank() == 3;
        const int64_t bt = b3 ? s[0] : 1, m = s[s.rank() - 2], n = s[s.rank() - 1];
        Tensor out = Tensor::host(b3 ? Shape{bt, n, m} : Shape{n, m}, DType::kF32);
        ASSERT_TRUE(ops::transpose(cpu, t, out).ok());
        for (int64_t b = 0; b < bt; ++b)
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j)
                    ASSERT_EQ(out.data_as<const float>()[(b * n + j) * m + i],
                              t.data_as<const float>()[(b * m + i) * n + j]);
    }
    Tensor u16 = Tensor::host(Shape{2, 3}, DType::kBF16);
    for (int i = 0; i < 6; ++i) u16.data_as<uint16_t>()[i] = uint16_t(0x3f80 + i);
    Tensor u16t = Tensor::host(Shape{3, 2}, DType::kBF16);
    ASSERT_TRUE(ops::transpose(cpu, u16, u16t).ok());
    EXPECT_EQ(u16t.data_as<uint16_t>()[1], 0x3f83);
    Tensor wrong = Tensor::host(Shape{3, 2}, DType::kF32);
    EXPECT_FALSE(ops::transpose(cpu, u16, wrong).ok()) << "dtype mismatch";
    EXPECT_FALSE(ops::transpose(cpu, u16, u16).ok()) << "shape";
}

// ---- CUDA ------------------------------------------------------------------------------------------------

Tensor on(const ops::Context& ctx, const Tensor& t) {
    return t.to(ctx.device).value();
}
Tensor back(const ops::Context& ctx, const Tensor& t) {
    EXPECT_TRUE(cuda::stream_synchronize(ctx.stream()).ok());
    return t.to(Device::cpu()).value();
}

TEST(AudioEncoderOpsCuda, MatchCpu) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    const ops::Context cpu = ops::Context::cpu();
    Tensor x = random_host(Shape{2, 7, 1001}, 5, -3.0f, 3.0f), a = random_host(Shape{7}, 6, 0.2f, 2.0f);
    Tensor yc = Tensor::host(x.shape(), DType::kF32);
    ASSERT_TRUE(ops::snake(cpu, x, a, yc).ok());
    Tensor yd = Tensor::empty(x.shape(), DType::kF32, ctx.device).value();
    ASSERT_TRUE(ops::snake(ctx, on(ctx, x), on(ctx, a), yd).ok());
    EXPECT_LT(testing_support::compare(back(ctx, yd), yc).max_abs, 2e-6) << "snake";

    Tensor h = random_host(Shape{9, 2 * 64}, 7, -4.0f, 4.0f);
    for (const Shape& gs : {Shape{9, 64}}) {
        Tensor gc = Tensor::host(gs, DType::kF32);
        ASSERT_TRUE(ops::geglu(cpu, {.tanh = true}, h, gc).ok());
        Tensor gd = Tensor::empty(gs, DType::kF32, ctx.device).value();
        ASSERT_TRUE(ops::geglu(ctx, {.tanh = true}, on(ctx, h), gd).ok());
        EXPECT_LT(testing_support::compare(back(ctx, gd), gc).max_abs, 5e-6) << "geglu";
    }
    Tensor h7 = random_host(Shape{5, 14}, 8, -4.0f, 4.0f); // row length 7: the scalar path
    Tensor gc7 = Tensor::host(Shape{5, 7}, DType::kF32);
    ASSERT_TRUE(ops::geglu(cpu, {}, h7, gc7).ok());
    Tensor gd7 = Tensor::empty(Shape{5, 7}, DType::kF32, ctx.device).value();
    ASSERT_TRUE(ops::geglu(ctx, {}, on(ctx, h7), gd7).ok());
    EXPECT_LT(testing_support::compare(back(ctx, gd7), gc7).max_abs, 5e-6) << "geglu (erf, odd rows)";

    for (const Shape& s : {Shape{3, 100, 67}, Shape{2048, 7}, Shape{1, 33, 1}}) {
        Tensor t = random_host(s, 9, -1.0f, 1.0f);
        const int r = s.rank();
        const Shape ts = r == 3 ? Shape{s[0], s[2], s[1]} : Shape{s[1], s[0]};
        Tensor tc = Tensor::host(ts, DType::kF32);
        ASSERT_TRUE(ops::transpose(cpu, t, tc).ok());
        Tensor td = Tensor::empty(ts, DType::kF32, ctx.device).value();
        ASSERT_TRUE(ops::transpose(ctx, on(ctx, t), td).ok());
        EXPECT_EQ(testing_support::compare(back(ctx, td), tc).max_abs, 0.0) << s.to_string();
    }
}

// The CUDA encoder against the goldens, and against the CPU encoder on make-tiny's official-structure
// weights.
TEST(AudioVaeEncoderCuda, MatchesGoldensAndCpu) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto enc = load_audio_vae_encoder(kDir, ctx.device);
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    check_goldens(ctx, *enc, 1e-5, "cuda");

    const fs::path tmp = fs::path(H3_BINARY_DIR) / "test_audio_encoder_cuda";
    fs::remove_all(tmp);
    ASSERT_TRUE(write_tiny_audio_vae(tmp.string(), 21).ok());
    auto cpu_enc = load_audio_vae_encoder(tmp.string(), Device::cpu());
    auto gpu_enc = load_audio_vae_encoder(tmp.string(), ctx.device);
    ASSERT_TRUE(cpu_enc.ok() && gpu_enc.ok());
    Tensor stereo = random_host(Shape{2, 3 * 32000 + 17}, 11, -0.5f, 0.5f);
    auto want = encode_reference_audio_rows(ops::Context::cpu(), *cpu_enc, cpu_enc->config, stereo);
    auto got = encode_reference_audio_rows(ctx, *gpu_enc, gpu_enc->config, stereo);
    ASSERT_TRUE(want.ok() && got.ok());
    expect_close(*got, *want, 1e-5, "CUDA vs CPU rows (make-tiny structure, 3 s)");
}

// H3_VAE_BENCH=1: the official-size encoder with random weights on the GPU, 10 s of stereo timed; then the
// same weights on the CPU and on CUDA for 1 s (rel-RMS < 1e-4: fp32 through 2048-wide layers of random
// weights).
TEST(AudioVaeEncoderCuda, OfficialSizeTiming) {
    if (cuda::device_count() == 0 || !std::getenv("H3_VAE_BENCH"))
        GTEST_SKIP() << "set H3_VAE_BENCH=1 on a GPU";
    auto session = cli::DeviceSession::open("cuda");
    ASSERT_TRUE(session.ok());
    const ops::Context& ctx = (*session)->context();
    AudioVaeConfig c;
    c.latents_mean.assign(32, 0.0f);
    c.latents_std.assign(32, 1.0f);
    auto enc = random_audio_vae_encoder(ctx, c, 1);
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    Tensor stereo = random_host(Shape{2, 320000}, 12, -0.5f, 0.5f);
    ASSERT_TRUE(encode_reference_audio_rows(ctx, *enc, c, stereo).ok()); // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    auto rows = encode_reference_audio_rows(ctx, *enc, c, stereo);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(rows->shape(), (Shape{800, 32}));
    const std::vector<float> rv = to_f32_vector(*rows).value();
    for (float v : rv) ASSERT_TRUE(std::isfinite(v));
    std::printf("{\"audio_encode_seconds_10s_stereo\": %.4f}\n", s);
    // The official shapes (2048 channels, 8 heads of 256 pooled in bins of 8) on the CPU and on CUDA, 1 s.
    auto cpu_enc = random_audio_vae_encoder(ops::Context::cpu(), c, 1);
    ASSERT_TRUE(cpu_enc.ok());
    Tensor one = random_host(Shape{2, 32000}, 13, -0.5f, 0.5f);
    auto want = encode_reference_audio_rows(ops::Context::cpu(), *cpu_enc, c, one);
    auto got = encode_reference_audio_rows(ctx, *enc, c, one);
    ASSERT_TRUE(want.ok() && got.ok());
    expect_close(*got, *want, 1e-4, "CUDA vs CPU rows (official size, random weights, 1 s)");
}

} // namespace
} // namespace h3::model
