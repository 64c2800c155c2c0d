// The Qwen3-VL vision tower, DeepStack, MRoPE positions and the fl2va conditioner presentation against
// goldens from the PyTorch reference tools/reference/h3_vision.py (make_vision_goldens.py): a tiny tower
// (depth 4, hidden 16, 2 heads, patch 16, merge 2, out 64, a 8×8 position table, DeepStack after blocks 0, 2,
// 3) on the language stack of tests/data/text/A. fp32: only summation order differs, max |Δ| ≤ 1e-4 ·
// max|ref|.
#include "cli/device_setup.h"
#include "core/cuda_api.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "model/text/text_model.h"
#include "model/tiny/tiny_text.h"
#include "model/tokenizer/tokenizer.h"
#include "model/vision/vision_model.h"
#include "pipeline/text_conditioner.h"

#include "golden_compare.h"
#include "vision_test_data.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;
using namespace h3;
using namespace h3::model;
using testing_support::compare;
using testing_support::Diff;

namespace {

const std::string kData = std::string(H3_SOURCE_DIR) + "/tests/data/vision";

std::string checkpoint() {
    static const std::string dir = testing_support::vision_test_checkpoint("test_vision");
    return dir;
}

io::SafetensorsFile golden(const std::string& name) {
    return testing_support::vision_golden(name);
}

std::vector<int64_t> ints(const io::SafetensorsFile& f, const std::string& name) {
    return testing_support::golden_ints(f, name);
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what, double rel = 1e-4) {
    Diff d = compare(got, want);
    std::printf("[diff] %-28s max_abs %.3e (ref max %.3f) rel_rms %.3e\n", what.c_str(), d.max_abs, d.ref_max,
                d.rel_rms);
    EXPECT_LE(d.max_abs, rel * d.ref_max) << what << " rel-rms " << d.rel_rms;
}

Tensor tower_input(int64_t n, int64_t cols) {
    Tensor t = Tensor::host({n, cols}, DType::kF32);
    float* p = t.data_as<float>();
    for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < cols; ++c) p[r * cols + c] = float((r * 131 + c * 31) % 255) / 127.5f - 1.0f;
    return t;
}

pipeline::ConditionerImage keyframe(int i, int h, int w) {
    pipeline::ConditionerImage im;
    im.width = w;
    im.height = h;
    im.rgb.resize(static_cast<size_t>(w) * h * 3);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < 3; ++c)
                im.rgb[(static_cast<size_t>(y) * w + x) * 3 + c] =
                    static_cast<uint8_t>((y * 7 + x * 13 + c * 71 + i * 29 + (x * y) % 17) % 256);
    return im;
}

void check_tower(TextPrecision prec, const ops::Context& ctx, double rel) {
    SCOPED_TRACE(ctx.device.to_string() + (prec == TextPrecision::kFp32 ? " fp32" : " bf16"));
    auto ckpt = open_text_checkpoint(checkpoint());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    auto m = VisionModel::load(*ckpt, {.device = ctx.device, .precision = prec}, ctx);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto g = golden("tower.safetensors");
    auto gv = ints(g, "grids");
    std::vector<VisionGrid> grids;
    int64_t n = 0;
    for (size_t i = 0; i + 2 < gv.size(); i += 3) {
        grids.push_back({int(gv[i]), int(gv[i + 1]), int(gv[i + 2])});
        n += grids.back().patches();
    }
    ASSERT_EQ(grids.size(), 3u);
    std::map<std::string, Tensor> rec;
    IntermediateHook hook;
    hook.wants = [](const std::string&) { return true; };
    hook.record = [&](const std::string& name, const Tensor& t) {
        rec[name] = *t.to(Device::cpu(), ctx.stream());
    };
    auto out = (*m)->forward(tower_input(n, (*m)->config().patch_dim()), grids, hook);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ(out->deepstack.size(), 3u);
    expect_close(*out->embeds.to(Device::cpu(), ctx.stream()), *g.tensor("embeds"), "embeds", rel);
    for (int j = 0; j < 3; ++j)
        expect_close(*out->deepstack[size_t(j)].to(Device::cpu(), ctx.stream()),
                     *g.tensor("deepstack." + std::to_string(j)), "deepstack." + std::to_string(j), rel);
    for (int i = 0; i < 4; ++i) {
        const std::string name = "blocks." + std::to_string(i) + ".out";
        ASSERT_TRUE(rec.count(name)) << name;
        expect_close(rec[name], *g.tensor(name), name, rel);
    }
}

void check_conditioner(int keyframes, const ops::Context& ctx, bool fp32, double rel) {
    SCOPED_TRACE(std::to_string(keyframes) + " keyframes on " + ctx.device.to_string());
    auto tc = pipeline::TextConditioner::open({.checkpoint_dir = checkpoint(), .ctx = ctx, .fp32 = fp32});
    ASSERT_TRUE(tc.ok()) << tc.status().to_string();
    ASSERT_TRUE((*tc)->has_vision());
    pipeline::ConditionerRequest req;
    req.prompt = "a cat walks on the beach at sunset";
    const int sizes[2][2] = {{256, 256}, {320, 256}};
    for (int i = 0; i < keyframes; ++i) req.images.push_back(keyframe(i, sizes[i][0], sizes[i][1]));
    auto g = golden("cond" + std::to_string(keyframes) + ".safetensors");
    auto want_ids = ints(g, "ids"), want_tags = ints(g, "tags"), want_pos = ints(g, "positions");
    auto p = (*tc)->present(req);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(std::vector<int64_t>(p->ids.begin(), p->ids.end()), want_ids);
    EXPECT_EQ(std::vector<int64_t>(p->tags.begin(), p->tags.end()), want_tags);
    auto pos = mrope_positions(p->ids, (*tc)->vision()->config().image_token_id, p->llm_grids);
    ASSERT_TRUE(pos.ok()) << pos.status().to_string();
    std::vector<int64_t> flat;
    for (const auto& a : *pos) flat.insert(flat.end(), a.begin(), a.end());
    EXPECT_EQ(flat, want_pos);
    auto c = (*tc)->encode(req);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(std::vector<int64_t>(c->tags.begin(), c->tags.end()), want_tags);
    ASSERT_EQ(c->rows(), static_cast<int64_t>(want_ids.size()));
    expect_close(c->embeddings, *g.tensor("hidden"), "cond" + std::to_string(keyframes) + " hidden", rel);
}

} // namespace

TEST(Vision, ConfigFromJson) {
    auto j =
        nlohmann::json::parse(R"({"image_token_id": 7, "vision_config": {"depth": 27, "hidden_size": 1152,
        "intermediate_size": 4304, "num_heads": 16, "patch_size": 16, "out_hidden_size": 5120,
        "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24],
        "hidden_act": "gelu_pytorch_tanh"}})");
    auto c = VisionConfig::from_json(j, "cfg");
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->head_dim(), 72);
    EXPECT_EQ(c->pos_side(), 48);
    EXPECT_EQ(c->patch_dim(), 1536);
    EXPECT_EQ(c->image_token_id, 7);
    EXPECT_EQ(c->vision_start_token_id, 151652);
    EXPECT_EQ(c->deepstack_visual_indexes, (std::vector<int>{8, 16, 24}));
    j["vision_config"]["num_position_embeddings"] = 2300;
    auto bad = VisionConfig::from_json(j, "cfg");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("num_position_embeddings"), std::string::npos);
    j["vision_config"]["num_position_embeddings"] = 2304;
    j["vision_config"]["deepstack_visual_indexes"] = {8, 27};
    EXPECT_FALSE(VisionConfig::from_json(j, "cfg").ok());
    EXPECT_FALSE(VisionConfig::present(nlohmann::json::object()));
}

TEST(Vision, TowerCpuFp32MatchesReference) {
    check_tower(TextPrecision::kFp32, ops::Context::cpu(), 1e-4);
}

TEST(Vision, TowerCpuBf16NearReference) {
    // bf16 activations and weights vs the fp32 golden: a sanity bound (a layout error is O(1)).
    check_tower(TextPrecision::kBf16, ops::Context::cpu(), 5e-2);
}

TEST(Vision, PositionEmbeddingMatchesTransformers5) {
    // Bit-exact against tests/data/vision/pos_embed.safetensors (tools/reference/make_vision_pos_goldens.py,
    // numpy): the aligned-corners closed form src = i·(side−1)/(n−1) (some of these grids take other
    // positions than torch.linspace gave), fp32 weights and products, the four taps summed in fp32; in bf16
    // the tower adds that sum after one rounding ("pos_embed" hook), as `pos_embeds.to(hidden_states.dtype)`
    // does.
    auto ckpt = open_text_checkpoint(checkpoint());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    auto g = golden("pos_embed.safetensors");
    auto gv = ints(g, "grids");
    EXPECT_GT(ints(g, "linspace_rows")[0], 0);
    std::vector<VisionGrid> grids;
    int64_t n = 0;
    for (size_t i = 0; i + 2 < gv.size(); i += 3) {
        grids.push_back({int(gv[i]), int(gv[i + 1]), int(gv[i + 2])});
        n += grids.back().patches();
    }
    auto want = g.tensor("pos");
    ASSERT_TRUE(want.ok());
    const float* w = want->data_as<float>();
    for (TextPrecision prec : {TextPrecision::kFp32, TextPrecision::kBf16}) {
        auto m = VisionModel::load(*ckpt, {.precision = prec}, ops::Context::cpu());
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        Tensor pe = (*m)->position_embedding(grids);
        ASSERT_EQ(pe.numel(), want->numel());
        EXPECT_EQ(std::memcmp(pe.data(), w, static_cast<size_t>(pe.nbytes())), 0);
    }
    // The bf16 tower rounds the fp32 sum once before adding it.
    auto m = VisionModel::load(*ckpt, {.precision = TextPrecision::kBf16}, ops::Context::cpu());
    ASSERT_TRUE(m.ok());
    Tensor added;
    IntermediateHook hook;
    hook.wants = [](const std::string& name) { return name == "pos_embed"; };
    hook.record = [&](const std::string&, const Tensor& t) { added = *t.to(Device::cpu()); };
    ASSERT_TRUE((*m)->forward(tower_input(n, (*m)->config().patch_dim()), grids, hook).ok());
    ASSERT_TRUE(added.defined());
    ASSERT_EQ(added.dtype(), DType::kBF16);
    int wrong = 0;
    for (int64_t i = 0; i < added.numel(); ++i) wrong += added.data_as<uint16_t>()[i] != f32_to_bf16(w[i]);
    EXPECT_EQ(wrong, 0);
}

TEST(Vision, TowerRejectsBadGrids) {
    auto ckpt = open_text_checkpoint(checkpoint());
    ASSERT_TRUE(ckpt.ok());
    auto m = VisionModel::load(*ckpt, {.precision = TextPrecision::kFp32}, ops::Context::cpu());
    ASSERT_TRUE(m.ok());
    auto r = (*m)->forward(tower_input(12, 1536), {{1, 3, 4}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("multiples of 2"), std::string::npos) << r.status().to_string();
    r = (*m)->forward(tower_input(12, 1536), {{1, 4, 4}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("pixel_values"), std::string::npos) << r.status().to_string();
}

// Issue #22: a 2048-edge reference image is tens of thousands of patches (minutes on a CPU); the forward
// reads the cancel flag before every block and between chunks of query rows.
TEST(Vision, TowerStopsOnCancel) {
    auto ckpt = open_text_checkpoint(checkpoint());
    ASSERT_TRUE(ckpt.ok());
    auto m = VisionModel::load(*ckpt, {.precision = TextPrecision::kFp32}, ops::Context::cpu());
    ASSERT_TRUE(m.ok());
    const std::vector<VisionGrid> grids = {{1, 4, 4}};
    const Tensor px = tower_input(16, (*m)->config().patch_dim());
    std::atomic<bool> cancel{false};
    EXPECT_TRUE((*m)->forward(px, grids, {}, &cancel).ok());
    cancel = true;
    auto r = (*m)->forward(px, grids, {}, &cancel);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kCancelled);
    // the first op to read the flag (ops/cancel.h) or the tower's own check says so
    EXPECT_NE(r.status().message().find("cancelled"), std::string::npos) << r.status().to_string();
}

TEST(Vision, MropePositions) {
    // text 3, block 2×3, text 2, block 1×2, text 1 (get_rope_index).
    const int P = 9;
    std::vector<int32_t> ids = {1, 2, 3, P, P, P, P, P, P, 4, 5, P, P, 6};
    auto pos = mrope_positions(ids, P, {{1, 2, 3}, {1, 1, 2}});
    ASSERT_TRUE(pos.ok()) << pos.status().to_string();
    EXPECT_EQ((*pos)[0], (std::vector<int64_t>{0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7, 8, 8, 10}));
    EXPECT_EQ((*pos)[1], (std::vector<int64_t>{0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7, 8, 8, 10}));
    EXPECT_EQ((*pos)[2], (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8, 9, 10}));
    EXPECT_FALSE(mrope_positions(ids, P, {{1, 2, 3}}).ok());            // a block left over
    EXPECT_FALSE(mrope_positions(ids, P, {{1, 2, 3}, {1, 2, 2}}).ok()); // block too long
    EXPECT_FALSE(mrope_positions(ids, P, {{1, 2, 3}, {1, 1, 2}, {1, 1, 1}}).ok());
}

TEST(Vision, ConditionerOneKeyframeMatchesReference) {
    check_conditioner(1, ops::Context::cpu(), true, 1e-4);
}

TEST(Vision, ConditionerTwoKeyframesMatchesReference) {
    check_conditioner(2, ops::Context::cpu(), true, 1e-4);
}

TEST(Vision, ConditionerWithoutVisionTowerRejectsImages) {
    const fs::path d = fs::path(H3_BINARY_DIR) / "test_vision" / "text_only";
    fs::remove_all(d);
    fs::create_directories(d);
    for (const char* f : {"config.json", "model.safetensors"})
        fs::copy_file(fs::path(H3_SOURCE_DIR) / "tests/data/text/A/text_encoder" / f, d / f);
    ASSERT_TRUE(write_tiny_tokenizer((d / "tokenizer").string(), 0).ok());
    auto tc = pipeline::TextConditioner::open(
        {.checkpoint_dir = d.string(), .ctx = ops::Context::cpu(), .fp32 = true});
    ASSERT_TRUE(tc.ok()) << tc.status().to_string();
    EXPECT_FALSE((*tc)->has_vision());
    pipeline::ConditionerRequest req;
    req.prompt = "a cat";
    req.images.push_back(keyframe(0, 256, 256));
    auto c = (*tc)->encode(req);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), ErrorCode::kUnimplemented);
    EXPECT_NE(c.status().message().find("vision tower"), std::string::npos);
    req.images.clear();
    auto t = (*tc)->encode(req);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->tags, std::vector<int32_t>(5, pipeline::kTagText));
}

TEST(Vision, CudaMatchesReference) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = h3::cli::DeviceSession::open("cuda:0");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    check_tower(TextPrecision::kFp32, (*session)->context(), 1e-4);
    check_tower(TextPrecision::kBf16, (*session)->context(), 5e-2);
    check_conditioner(2, (*session)->context(), true, 1e-4);
}

TEST(Vision, TinyTextEncoderRunsKeyframes) {
    // make-tiny's text_encoder carries a tiny vision tower: a keyframe request runs end to end (bf16, CPU).
    const fs::path d = fs::path(H3_BINARY_DIR) / "test_vision" / "tiny";
    fs::remove_all(d);
    ASSERT_TRUE(write_tiny_tokenizer((d / "tokenizer").string()).ok());
    auto tok = tokenizer::Tokenizer::load((d / "tokenizer").string());
    ASSERT_TRUE(tok.ok());
    VisionConfig v = tiny_vision_config();
    v.image_token_id = tok->token_to_id("<|image_pad|>");
    v.vision_start_token_id = tok->token_to_id("<|vision_start|>");
    v.vision_end_token_id = tok->token_to_id("<|vision_end|>");
    ASSERT_TRUE(write_tiny_text_encoder(d.string(), 3, v).ok());
    auto tc = pipeline::TextConditioner::open({.checkpoint_dir = d.string(), .ctx = ops::Context::cpu()});
    ASSERT_TRUE(tc.ok()) << tc.status().to_string();
    ASSERT_TRUE((*tc)->has_vision());
    pipeline::ConditionerRequest req;
    req.prompt = "a cat sits on the windowsill";
    req.images = {keyframe(0, 256, 320), keyframe(1, 256, 320)};
    auto c = (*tc)->encode(req);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    const int64_t per_image = (256 / 32) * (320 / 32);
    int64_t video_rows = 0;
    for (int32_t t : c->tags) video_rows += t == pipeline::kTagVideo;
    EXPECT_EQ(video_rows, 2 * (per_image + 2));
    EXPECT_EQ(c->embeddings.dim(1), tiny_text_config().hidden_size);
    auto f = to_f32_vector(c->embeddings);
    ASSERT_TRUE(f.ok());
    for (float x : *f) ASSERT_TRUE(std::isfinite(x));
    // The keyframes change the prompt rows' encoding (attention reaches them).
    pipeline::ConditionerRequest text_only{.prompt = req.prompt, .images = {}, .references = {}};
    auto t = (*tc)->encode(text_only);
    ASSERT_TRUE(t.ok());
    const int64_t lp = t->rows(), hs = t->embeddings.dim(1);
    auto tf = to_f32_vector(t->embeddings);
    double diff = 0;
    for (int64_t i = 0; i < lp * hs; ++i)
        diff = std::max(diff, std::abs(double((*f)[size_t((c->rows() - lp) * hs + i)]) - (*tf)[size_t(i)]));
    EXPECT_GT(diff, 1e-3);
}
