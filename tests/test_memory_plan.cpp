// The memory budget planner (runtime/memory_plan.h) on the official component sizes computed from the
// configs: budgets that fit resident, need layerwise, need int8, cannot fit; forced placements; byte sizes.
#include "runtime/component_sizes.h"
#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace h3;
using namespace h3::runtime;
using model::Residency;
using model::WeightFormat;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

std::vector<ComponentBytes> official(model::DitPrecision p = model::DitPrecision::kBf16) {
    const Workload w; // the release shape
    return {dit_component_bytes(model::DitConfig{}, p, w),
            text_component_bytes(model::TextConfig::official(), p,
                                 model::TextConfig::official().used_layers(), w)};
}

} // namespace

TEST(MemoryPlan, ComponentBytesFromTheConfigs) {
    const model::DitConfig c;
    const ComponentBytes d = official()[0];
    const uint64_t D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim;
    EXPECT_EQ(d.layers, 50);
    EXPECT_EQ(d.layer, 2 * (3 * D * I + I * D + 2 * F * D + F * D)); // 385.35 M bf16 parameters per block
    EXPECT_EQ(d.layer_int8, d.layer / 2 + 4 * (3 * I + D + 2 * F + D));
    EXPECT_NEAR(static_cast<double>(d.resident_extra), 50.0 * 2 * (18 * D * c.time_embed_dim + 18 * D), 1.0);
    // Everything together is the checkpoint's size (the official index says 66,280,430,080 bytes).
    const uint64_t total = d.fixed + 50 * d.layer + d.resident_extra;
    EXPECT_NEAR(static_cast<double>(total), 66280430080.0, 0.001 * 66280430080.0);
    const ComponentBytes t = official()[1];
    EXPECT_EQ(t.layers, 50);
    EXPECT_GT(t.layer, 900'000'000u); // ≈ 0.98 GB per Qwen3-VL-32B layer in bf16
    EXPECT_GT(d.working, 2 * kGiB);   // the forward's scratch at 38,247 rows
    EXPECT_EQ(dit_component_bytes(c, model::DitPrecision::kFp32, Workload{}).layer, 2 * d.layer);
}

TEST(MemoryPlan, PlacementBytes) {
    ComponentBytes c;
    c.name = "x";
    c.fixed = 100;
    c.layers = 10;
    c.layer = 50;
    c.layer_int8 = 26;
    c.resident_extra = 7;
    model::ResidencyOptions r;
    EXPECT_EQ(placement_bytes(c, r), 100u + 7 + 500);
    r.mode = Residency::kLayerwise;
    r.resident_layers = 3;
    EXPECT_EQ(placement_bytes(c, r), 100u + (3 + 2) * 50); // K resident + a ring of two slots
    r.resident_layers = 9;
    EXPECT_EQ(placement_bytes(c, r), 100u + (9 + 1) * 50); // one streamed layer needs one slot
    r.resident_layers = 10;
    EXPECT_EQ(placement_bytes(c, r), 100u + 10 * 50);
    r.resident_layers = 3;
    r.format = WeightFormat::kInt8;
    EXPECT_EQ(placement_bytes(c, r), 100u + 5 * 26 + 50); // int8 layers + one native staging layer
}

TEST(MemoryPlan, FitsResident) {
    PlanOptions o;
    o.budget = 141 * kGiB; // an H200
    auto p = plan_memory(official(), o);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->find("transformer")->residency.mode, Residency::kResident);
    EXPECT_EQ(p->find("transformer")->residency.format, WeightFormat::kNative);
    EXPECT_EQ(p->find("text_encoder")->residency.mode, Residency::kResident);
    EXPECT_LE(p->peak, o.budget);
    EXPECT_NE(p->text.find("transformer"), std::string::npos);
    EXPECT_NE(p->text.find("stage peaks"), std::string::npos);
}

TEST(MemoryPlan, NeedsLayerwise) {
    PlanOptions o;
    o.budget = 24 * kGiB;
    auto p = plan_memory(official(), o);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const ComponentPlan& d = *p->find("transformer");
    EXPECT_EQ(d.residency.mode, Residency::kLayerwise);
    EXPECT_EQ(d.residency.format, WeightFormat::kNative);
    EXPECT_GT(d.residency.resident_layers, 5);
    EXPECT_LT(d.residency.resident_layers, 30);
    EXPECT_EQ(p->find("text_encoder")->residency.mode, Residency::kLayerwise);
    EXPECT_LE(p->peak, o.budget);
    // The chosen K is the largest that fits: one more resident block would not.
    const ComponentBytes dit = official()[0];
    model::ResidencyOptions more = d.residency;
    more.resident_layers += 1;
    EXPECT_GT(placement_bytes(dit, more) + dit.working, o.budget);
    // A server keeping the DiT between jobs still fits (the text stage shares the device with it).
    o.keep_between_jobs = true;
    auto ps = plan_memory(official(), o);
    ASSERT_TRUE(ps.ok()) << ps.status().to_string();
    EXPECT_TRUE(ps->find("transformer")->kept);
    EXPECT_FALSE(ps->find("text_encoder")->kept);
    EXPECT_LE(ps->find("transformer")->residency.resident_layers, d.residency.resident_layers);
    EXPECT_LE(ps->peak, o.budget);
}

TEST(MemoryPlan, NeedsInt8) {
    // Fully resident on a 64 GiB card: bf16 (with the AdaLN projections) does not fit, int8 does.
    PlanOptions o;
    o.budget = 64 * kGiB;
    o.residency = Residency::kResident;
    auto native = plan_memory(official(), o);
    ASSERT_FALSE(native.ok());
    EXPECT_NE(native.status().message().find("int8"), std::string::npos) << native.status().message();
    o.allow_int8 = true;
    auto p = plan_memory(official(), o);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->find("transformer")->residency.mode, Residency::kResident);
    EXPECT_EQ(p->find("transformer")->residency.format, WeightFormat::kInt8);
    EXPECT_LE(p->peak, o.budget);
    // Forced int8 layerwise within 24 GiB keeps more blocks resident than bf16 (half the bytes each).
    PlanOptions l;
    l.budget = 24 * kGiB;
    l.format = WeightFormat::kInt8;
    auto pl = plan_memory(official(), l);
    auto pn = plan_memory(official(), PlanOptions{.budget = 24 * kGiB});
    ASSERT_TRUE(pl.ok() && pn.ok());
    EXPECT_GT(pl->find("transformer")->residency.resident_layers,
              pn->find("transformer")->residency.resident_layers);
}

TEST(MemoryPlan, CannotFit) {
    PlanOptions o;
    o.budget = 4 * kGiB;
    auto p = plan_memory(official(), o);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("cannot fit"), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find("transformer at least"), std::string::npos) << p.status().message();
    // A forced placement that does not fit is refused even when another would.
    PlanOptions f;
    f.budget = 24 * kGiB;
    f.resident_layers = 40;
    auto pf = plan_memory(official(), f);
    ASSERT_FALSE(pf.ok());
    EXPECT_NE(pf.status().message().find("cannot fit"), std::string::npos);
    f.resident_layers = 80;
    auto none = plan_memory(official(), f);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.status().message().find("does not exist"), std::string::npos) << none.status().message();
}

TEST(MemoryPlan, ParsesSizes) {
    EXPECT_EQ(*parse_byte_size("24GiB"), 24 * kGiB);
    EXPECT_EQ(*parse_byte_size("24 GiB"), 24 * kGiB);
    EXPECT_EQ(*parse_byte_size("80GB"), 80'000'000'000u);
    EXPECT_EQ(*parse_byte_size("512MiB"), 512ull << 20);
    EXPECT_EQ(*parse_byte_size("1.5TiB"), 3ull << 39);
    EXPECT_EQ(*parse_byte_size("4096"), 4096u);
    for (const char* bad : {"", "abc", "0", "-3GiB", "12 parsecs", "GiB"}) {
        auto r = parse_byte_size(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_NE(r.status().message().find("gpu_memory_budget"), std::string::npos);
        EXPECT_EQ(r.status().field(), "gpu_memory_budget");
    }
}

// The video decoder's working memory (the planner's estimate, and what a server's kept DiT workspace gives
// way to before a decode): one 256-px tile is one tile-clip per call; the release canvas (28 tiles) fills a
// call with 16 of them.
TEST(MemoryPlan, VideoDecoderWorkingBytes) {
    const model::VideoVaeConfig c; // the official decoder
    const model::ClipPlan plan = model::plan_clips(37, c.clip_length, c.patch_t, c.token_drop);
    const uint64_t clip = static_cast<uint64_t>(plan.clip_latents);
    const uint64_t side = 256 / static_cast<uint64_t>(c.patch);
    const uint64_t tokens = side * side * clip + static_cast<uint64_t>(c.num_register_tokens);
    const uint64_t one =
        tokens * (6 * static_cast<uint64_t>(c.dim()) + 2 * static_cast<uint64_t>(c.ffn_dim())) * 4 +
        3 * clip * static_cast<uint64_t>(c.patch_t) * 256 * 256 * 4;
    EXPECT_EQ(video_decoder_working_bytes(c, 256, 256, 37), one);
    EXPECT_EQ(video_decoder_working_bytes(c, 1344, 768, 37), 16 * one);
    EXPECT_GT(one, 0u);
}
