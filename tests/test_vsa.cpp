// FastH3 and video sparse attention above the ops (CPU): the tile map against goldens computed here by brute
// force (odd geometries, short prefix tiles, several keyframes, the spec's 1344×768×124 example), the
// selection against hand-written lists, the DiT with VSA (sparsity 0 and every-block-dense equal dense
// attention byte for byte; a zero compression gate is inert; sparse differs), FastH3 checkpoints (gates
// loaded, partial gates rejected), the sidecar contract, the rung schedule and the --attention spec.
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/dit/dit_attention.h"
#include "model/dit/dit_model.h"
#include "model/dit/dit_random.h"
#include "model/dit/random_weights.h"
#include "model/fasth3_contract.h"
#include "model/tiny/tiny_checkpoint.h"
#include "ops/ops.h"
#include "pipeline/denoise.h"
#include "pipeline/job_builder.h"
#include "pipeline/layout.h"
#include "pipeline/schedule.h"
#include "runtime/model_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

using namespace h3;
namespace fs = std::filesystem;

namespace {

// ---- the tile map ----------------------------------------------------------------------------------------
// The golden: every prefix row's tile from its segment and offset, every video row's tile from its (t, h, w)
// cube; a tile's slots are its rows in ascending packed order (both orders agree on that).
struct GoldenTiles {
    std::vector<int32_t> row_tiles;
    int64_t prefix_tiles = 0, video_tiles = 0;
};
GoldenTiles golden_tiles(const std::vector<int64_t>& prefix, int64_t T, int64_t H, int64_t W) {
    GoldenTiles g;
    int64_t base = 0;
    for (int64_t s : prefix) {
        for (int64_t r = 0; r < s; ++r) g.row_tiles.push_back(static_cast<int32_t>(g.prefix_tiles + r / 64));
        g.prefix_tiles += (s + 63) / 64;
        base += s;
    }
    const int64_t nh = (H + 3) / 4, nw = (W + 3) / 4;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w)
                g.row_tiles.push_back(
                    static_cast<int32_t>(g.prefix_tiles + ((t / 4) * nh + h / 4) * nw + w / 4));
    g.video_tiles = (T + 3) / 4 * nh * nw;
    return g;
}

void expect_tiles_match_golden(const std::vector<int64_t>& prefix, int64_t T, int64_t H, int64_t W) {
    SCOPED_TRACE("tiles for T=" + std::to_string(T) + " H=" + std::to_string(H) + " W=" + std::to_string(W));
    auto m = ops::build_vsa_tile_map({.prefix_segments = prefix, .grid_t = T, .grid_h = H, .grid_w = W});
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const GoldenTiles g = golden_tiles(prefix, T, H, W);
    EXPECT_EQ(m->num_prefix_tiles, g.prefix_tiles);
    EXPECT_EQ(m->num_video_tiles, g.video_tiles);
    EXPECT_EQ(m->row_tiles, g.row_tiles);
    std::map<int32_t, std::vector<int32_t>> rows_of;
    for (size_t r = 0; r < g.row_tiles.size(); ++r)
        rows_of[g.row_tiles[r]].push_back(static_cast<int32_t>(r));
    ASSERT_EQ(static_cast<int64_t>(rows_of.size()), m->num_tiles());
    for (const auto& [tile, rows] : rows_of) {
        EXPECT_EQ(m->tile_sizes[static_cast<size_t>(tile)], static_cast<int32_t>(rows.size()))
            << "tile " << tile;
        for (int s = 0; s < 64; ++s)
            EXPECT_EQ(m->slot_rows[static_cast<size_t>(tile * 64 + s)],
                      s < static_cast<int>(rows.size()) ? rows[static_cast<size_t>(s)] : -1)
                << "tile " << tile << " slot " << s;
    }
}

TEST(VsaTiles, MatchBruteForceGoldens) {
    expect_tiles_match_golden({7, 0, 65, 130}, 5, 6,
                              10);                    // short prefix tiles, an empty segment, partial cubes
    expect_tiles_match_golden({}, 3, 1, 9);           // no prefix, a 1-row-high grid
    expect_tiles_match_golden({64, 128, 1}, 8, 8, 8); // whole tiles and cubes
    expect_tiles_match_golden({200}, 1, 1, 1);        // one-row video
}

TEST(VsaTiles, SpecExampleCounts) {
    // 1344×768×124 with the README prompt: L = 537, 2A = 414, video 37×24×42 (spec §12 step 1).
    auto m =
        ops::build_vsa_tile_map({.prefix_segments = {537, 0, 414}, .grid_t = 37, .grid_h = 24, .grid_w = 42});
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->num_prefix_tiles, 9 + 7);
    EXPECT_EQ(m->num_video_tiles, 660);
    EXPECT_EQ(m->rows, 537 + 414 + 37 * 24 * 42);
    EXPECT_EQ(m->tile_sizes[8], 537 - 8 * 64); // the text's short last tile
    EXPECT_EQ(m->tile_sizes[15], 414 - 6 * 64);
    EXPECT_EQ(m->tile_sizes.back(), 1 * 4 * 2); // the last cube: t 36, h 20..23, w 40..41
    EXPECT_EQ(ops::vsa_keep(0.9, 660), 66);
    EXPECT_EQ(ops::vsa_keep(0.9, 26 * 6 * 11), 172); // 15 s: 102 latent frames
    EXPECT_EQ(ops::vsa_keep(0.0, 660), 660);
    EXPECT_EQ(ops::vsa_keep(0.999, 5), 1);
}

TEST(VsaTiles, KeyframesAreOnePrefixSegment) {
    // fl2va with both keyframes: [text 11 | 2 keyframes of 3×5 rows | audio 2·178 | video 32×3×5]
    auto g = pipeline::resolve_geometry({.width = 160, .height = 96, .frames = 107}, model::LatentSpec{});
    ASSERT_TRUE(g.ok());
    pipeline::LayoutParams lp;
    lp.geometry = *g;
    lp.text_tags.assign(11, pipeline::kTagText);
    lp.keyframes = {pipeline::KeyframeAnchor::kFirst, pipeline::KeyframeAnchor::kLast};
    const pipeline::PackedLayout L = pipeline::build_layout(lp);
    const model::PackedSegments seg = pipeline::packed_segments(L);
    ASSERT_TRUE(seg.defined());
    EXPECT_EQ(seg.prefix, (std::vector<int64_t>{11, 2 * 15, 2 * 178}));
    EXPECT_EQ(seg.video_t, 32);
    EXPECT_EQ(seg.video_h, 3);
    EXPECT_EQ(seg.video_w, 5);
    auto m = ops::build_vsa_tile_map(
        {.prefix_segments = seg.prefix, .grid_t = seg.video_t, .grid_h = seg.video_h, .grid_w = seg.video_w});
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->rows, L.rows);
    // text 1 tile, keyframes 1 tile (30 rows, no text or audio in it), audio 6 tiles (64·5 + 36)
    EXPECT_EQ(m->num_prefix_tiles, 1 + 1 + 6);
    EXPECT_EQ(m->tile_sizes[0], 11);
    EXPECT_EQ(m->tile_sizes[1], 30);
    for (int s = 0; s < 30; ++s)
        EXPECT_EQ(m->slot_rows[static_cast<size_t>(64 + s)], L.video_indices[static_cast<size_t>(s)]);
    EXPECT_EQ(m->tile_sizes[7], 356 - 5 * 64);
    // ref2va has no such form; VSA refuses it with the alternative named.
    EXPECT_FALSE(pipeline::packed_segments(pipeline::PackedLayout{.ref2va = true}).defined());
    model::AttentionChoice vsa;
    vsa.kind = model::AttentionChoice::Kind::kVsa;
    Status s = pipeline::check_attention_task(vsa, /*ref2va=*/true);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("ref2va is not supported"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("use attention dense"), std::string::npos);
    EXPECT_TRUE(pipeline::check_attention_task(vsa, false).ok());
}

// ---- selection goldens
// ----------------------------------------------------------------------------------------
TEST(VsaSelect, HandWrittenLists) {
    // 2 prefix tiles (prefix 64 + 10) and 4 video tiles (grid 4×4×16): n = 6.
    auto m = ops::build_vsa_tile_map({.prefix_segments = {74}, .grid_t = 4, .grid_h = 4, .grid_w = 16});
    ASSERT_TRUE(m.ok());
    ASSERT_EQ(m->num_prefix_tiles, 2);
    ASSERT_EQ(m->num_video_tiles, 4);
    auto tiles = ops::upload_vsa_tiles(ops::Context::cpu(), *m);
    ASSERT_TRUE(tiles.ok());
    Tensor scores = Tensor::host(Shape{1, 6, 6}, DType::kF32);
    // video query rows 2..5; columns 0..5
    const float rows[4][6] = {
        {9, 9, 1, 5, 5, 3}, {0, 0, 7, 2, 7, 7}, {3, 8, 0, 0, 0, 0}, {-1, 4, 2, 6, NAN, 1}};
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j) scores.data_as<float>()[(2 + i) * 6 + j] = rows[i][j];
    auto run = [&](int64_t keep, bool compete) {
        const ops::VsaSelectParams p{.keep = keep, .compete = compete};
        Tensor l = Tensor::host(Shape{1, 4, ops::vsa_select_width(p, 2, 6)}, DType::kI32);
        EXPECT_TRUE(ops::vsa_select(ops::Context::cpu(), p, *tiles, scores, l).ok());
        return std::vector<int32_t>(l.data_as<int32_t>(), l.data_as<int32_t>() + l.numel());
    };
    // exempt keep 2: prefix 0, 1 + the two best video tiles (ties to the lower index)
    EXPECT_EQ(run(2, false), (std::vector<int32_t>{0, 1, 3, 4, 0, 1, 2, 4, 0, 1, 2, 3, 0, 1, 2, 3}));
    // compete keep 1: the best 3 of all 6 tiles
    EXPECT_EQ(run(1, true), (std::vector<int32_t>{0, 1, 3, 2, 4, 5, 0, 1, 2, 1, 2, 3}));
    // keep everything: every tile, ascending
    const std::vector<int32_t> all = run(4, false);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j) EXPECT_EQ(all[static_cast<size_t>(i * 6 + j)], j);
}

// ---- the DiT with VSA
// ----------------------------------------------------------------------------------------
model::SyntheticLayout tiny_layout() {
    // text 9 (1 short tile), audio 2·40 (64 + 16), video 7×6×5 (cubes 4/3 × 4/2 × 4/1): 12 video tiles.
    return {.text = 9, .latent_frames = 7, .latent_h = 12, .latent_w = 10, .audio = 40};
}

std::unique_ptr<model::DitModel> tiny_model(model::DitPrecision prec, bool gates, float gate_value = -1) {
    const model::DitConfig c = model::tiny_dit_config();
    auto w = model::random_dit_weights(c, ops::Context::cpu(), prec,
                                       {.blocks = 0, .adaln = true, .gate_compress = gates, .seed = 4});
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    if (gates && gate_value >= 0)
        for (auto& b : w->blocks) {
            auto v = std::vector<float>(static_cast<size_t>(b.gate_compress.numel()), gate_value);
            b.gate_compress = host_tensor_from(v, b.gate_compress.shape(), b.gate_compress.dtype());
        }
    return std::make_unique<model::DitModel>(c, std::move(*w), prec, ops::Context::cpu());
}

model::DitOutputs run(const model::DitModel& m, const model::AttentionChoice& a, int step = 0) {
    const model::DitPackedInputs in = model::synthetic_inputs(m.config(), tiny_layout(), 0.3f, 0.55f, 5);
    model::DitForwardOptions o;
    o.attention = a;
    o.step = step;
    auto out = m.forward(in, nullptr, o);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? std::move(out).value() : model::DitOutputs{};
}

model::AttentionChoice vsa(const std::string& spec) {
    auto a = model::parse_attention_choice(spec);
    EXPECT_TRUE(a.ok()) << a.status().to_string();
    return *a;
}

bool same_bytes(const model::DitOutputs& a, const model::DitOutputs& b) {
    return a.sample.nbytes() == b.sample.nbytes() && a.audio_sample.nbytes() == b.audio_sample.nbytes() &&
           a.sample.nbytes() > 0 && std::memcmp(a.sample.data(), b.sample.data(), a.sample.nbytes()) == 0 &&
           std::memcmp(a.audio_sample.data(), b.audio_sample.data(), a.audio_sample.nbytes()) == 0;
}

TEST(DitVsa, SparsityZeroEqualsDense) {
    for (auto prec : {model::DitPrecision::kFp32, model::DitPrecision::kBf16}) {
        SCOPED_TRACE(model::precision_name(prec));
        auto m = tiny_model(prec, false);
        const model::DitOutputs dense = run(*m, {});
        EXPECT_TRUE(same_bytes(run(*m, vsa("vsa:sparsity=0")), dense));
        // every block forced dense, or a step before dense_first_n_steps: dense again
        EXPECT_TRUE(same_bytes(run(*m, vsa("vsa:sparsity=0.7,dense_layers=0/1")), dense));
        EXPECT_TRUE(same_bytes(run(*m, vsa("vsa:sparsity=0.7,dense_first_n_steps=1"), 0), dense));
        // sparse differs, in both modes, and from step dense_first_n_steps on
        const model::DitOutputs sparse = run(*m, vsa("vsa:sparsity=0.7"));
        EXPECT_FALSE(same_bytes(sparse, dense));
        EXPECT_TRUE(same_bytes(run(*m, vsa("vsa:sparsity=0.7,dense_first_n_steps=1"), 1), sparse));
        EXPECT_FALSE(same_bytes(run(*m, vsa("vsa:sparsity=0.7,mode=compete")), sparse));
        for (float v : *to_f32_vector(sparse.sample)) ASSERT_TRUE(std::isfinite(v));
    }
}

TEST(DitVsa, ZeroCompressionGateIsInert) {
    for (auto prec : {model::DitPrecision::kFp32, model::DitPrecision::kBf16}) {
        SCOPED_TRACE(model::precision_name(prec));
        auto plain = tiny_model(prec, false), zero = tiny_model(prec, true, 0.0f),
             trained = tiny_model(prec, true);
        for (const std::string spec : {"vsa:sparsity=0.7", "vsa:sparsity=0"}) {
            SCOPED_TRACE(spec);
            const model::DitOutputs base = run(*plain, vsa(spec));
            EXPECT_TRUE(same_bytes(run(*zero, vsa(spec)), base));
            EXPECT_FALSE(same_bytes(run(*trained, vsa(spec)), base)) << "a trained gate adds the branch";
        }
        // --attention dense ignores the gates (the base model's attention)
        EXPECT_TRUE(same_bytes(run(*trained, {}), run(*plain, {})));
    }
}

TEST(DitVsa, NeedsSegments) {
    auto m = tiny_model(model::DitPrecision::kFp32, false);
    model::DitPackedInputs in = model::synthetic_inputs(m->config(), tiny_layout(), 0.3f, 0.55f, 5);
    in.segments = {};
    model::DitForwardOptions o;
    o.attention = vsa("vsa");
    auto out = m->forward(in, nullptr, o);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("[text | keyframes | audio | video]"), std::string::npos);
    in = model::synthetic_inputs(m->config(), tiny_layout(), 0.3f, 0.55f, 5);
    o.attention = vsa("vsa:dense_layers=7");
    out = m->forward(in, nullptr, o);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("dense_layers holds block 7"), std::string::npos);
}

// ---- FastH3 checkpoints
// -----------------------------------------------------------------------------------------
fs::path temp_dir(const std::string& name) {
    fs::path p = fs::path(H3_BINARY_DIR) / "test_vsa" / name;
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

TEST(FastH3, TinyCheckpointCarriesGatesAndContract) {
    const fs::path dir = temp_dir("tiny_fasth3");
    ASSERT_TRUE(
        model::write_tiny_checkpoint({.dir = dir.string(), .seed = 2, .variant = model::TinyVariant::kFastH3})
            .ok());
    auto ck = model::open_dit_checkpoint(dir.string());
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto m = model::DitModel::load(*ck, {.device = Device::cpu(), .precision = model::DitPrecision::kFp32},
                                   ops::Context::cpu());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto weights = model::load_dit_weights(*ck, {.precision = model::DitPrecision::kFp32});
    ASSERT_TRUE(weights.ok());
    EXPECT_TRUE(weights->has_gate_compress());
    auto contract = model::read_fasth3_contract(dir.string());
    ASSERT_TRUE(contract.ok() && contract->has_value()) << contract.status().to_string();
    EXPECT_TRUE((*contract)->vsa);
    EXPECT_EQ((*contract)->vsa_sparsity, 0.9);
    EXPECT_EQ((*contract)->grid_rungs, (std::vector<int>{1000, 750, 500, 250}));
    EXPECT_EQ((*contract)->dmd_denoising_steps, (std::vector<int>{999, 749, 500, 250}));
    // the ref DiT and a base checkpoint have no gates; a base checkpoint has no contract
    auto ref = model::open_dit_checkpoint(dir.string(), "transformer_ref");
    ASSERT_TRUE(ref.ok());
    auto rm = model::load_dit_weights(*ref, {.precision = model::DitPrecision::kFp32});
    ASSERT_TRUE(rm.ok());
    EXPECT_FALSE(rm->has_gate_compress());
    auto none = model::read_fasth3_contract(temp_dir("no_contract").string());
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
}

TEST(FastH3, PartialGatesAreRejected) {
    const fs::path dir = temp_dir("partial_gates");
    const model::DitConfig c = model::tiny_dit_config();
    std::vector<io::NamedTensor> tensors;
    for (const auto& spec : model::dit_tensor_specs(c, model::DitFormat::kDiffusers))
        tensors.push_back({spec.name, model::random_dit_tensor(spec, 1)});
    const model::TensorSpec g = model::gate_compress_spec(c, 1); // block 1 only
    tensors.push_back({g.name, model::random_dit_tensor(g, 1)});
    ASSERT_TRUE(io::write_json_file((dir / "config.json").string(), c.to_diffusers_json()).ok());
    ASSERT_TRUE(io::write_safetensors((dir / "diffusion_pytorch_model.safetensors").string(), tensors).ok());
    auto ck = model::open_dit_checkpoint(dir.string());
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto w = model::load_dit_weights(*ck, {.precision = model::DitPrecision::kFp32});
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.status().message().find("transformer_blocks.0.attn.to_gate_compress.weight' is missing"),
              std::string::npos)
        << w.status().message();
}

nlohmann::json contract_json() {
    return {{"schema_version", "fasth3-inference-contract-v1"},
            {"task", "t2av"},
            {"dmd_denoising_steps", {999, 749, 500, 250}},
            {"num_inference_steps", 5},
            {"transformer_forwards", 4},
            {"guidance_scale", 1.0},
            {"attention_backend", "VIDEO_SPARSE_ATTN_H3"},
            {"vsa_tile_size", 64},
            {"vsa_sparsity", 0.9}};
}

TEST(FastH3, ContractFieldsAreChecked) {
    auto ok = model::parse_fasth3_contract(contract_json(), "x.json");
    ASSERT_TRUE(ok.ok()) << ok.status().to_string();
    EXPECT_EQ(ok->transformer_forwards, 4);
    auto expect_bad = [](nlohmann::json j, const std::string& needle) {
        auto r = model::parse_fasth3_contract(j, "x.json");
        ASSERT_FALSE(r.ok()) << needle;
        EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    };
    auto with = [](const char* k, nlohmann::json v) {
        nlohmann::json j = contract_json();
        j[k] = v;
        return j;
    };
    expect_bad(with("schema_version", "v0"), "schema_version");
    expect_bad(with("task", "ref2va"), "task");
    expect_bad(with("guidance_scale", 3.5), "guidance_scale");
    expect_bad(with("vsa_tile_size", 256), "vsa_tile_size");
    expect_bad(with("vsa_sparsity", 1.0), "vsa_sparsity");
    expect_bad(with("attention_backend", "SLIDING_TILE_ATTN"), "attention_backend");
    expect_bad(with("transformer_forwards", 8), "transformer_forwards");
    expect_bad(with("dmd_denoising_steps", nlohmann::json{999, 700, 500, 250}), "uniform 5-point grid");
    expect_bad(with("dmd_denoising_steps", nlohmann::json{999, 999, 500, 250}), "strictly decreasing");
    // a dense student: no VSA; an 8-rung ladder labels the 9-point grid
    auto dense = model::parse_fasth3_contract(with("attention_backend", "FLASH_ATTN"), "x.json");
    ASSERT_TRUE(dense.ok());
    EXPECT_FALSE(dense->vsa);
    nlohmann::json v2 = contract_json();
    v2["dmd_denoising_steps"] = {999, 874, 749, 624, 500, 375, 250, 125};
    v2["transformer_forwards"] = 8;
    v2["num_inference_steps"] = 9;
    auto eight = model::parse_fasth3_contract(v2, "x.json");
    ASSERT_TRUE(eight.ok()) << eight.status().to_string();
    EXPECT_EQ(eight->grid_rungs, (std::vector<int>{1000, 875, 750, 625, 500, 375, 250, 125}));
}

TEST(FastH3, RungScheduleIsTheUniformGrid) {
    auto rungs = pipeline::make_dual_rung_schedule({1000, 750, 500, 250}, 12.0, 3.0);
    auto grid = pipeline::make_dual_schedule(5, 12.0, 3.0);
    ASSERT_TRUE(rungs.ok() && grid.ok());
    EXPECT_EQ(rungs->forwards(), 4);
    EXPECT_EQ(rungs->video.sigmas, grid->video.sigmas);
    EXPECT_EQ(rungs->audio.sigmas, grid->audio.sigmas);
    EXPECT_EQ(rungs->video.timesteps, grid->video.timesteps);
    // σ_v = 1, 36/37, 12/13, 0.8, 0 (spec §7, N = 5)
    EXPECT_FLOAT_EQ(rungs->video.sigmas[1], 36.0f / 37.0f);
    EXPECT_FLOAT_EQ(rungs->audio.sigmas[3], 0.5f);
    // the declared labels as rungs would be another schedule
    auto labels = pipeline::make_rung_schedule({999, 749, 500, 250}, 12.0);
    ASSERT_TRUE(labels.ok());
    EXPECT_NE(labels->sigmas[0], grid->video.sigmas[0]);
    EXPECT_FALSE(pipeline::make_rung_schedule({750, 1000}, 12.0).ok());
    EXPECT_FALSE(pipeline::make_rung_schedule({1001}, 12.0).ok());
}

TEST(FastH3, AttentionSpec) {
    auto a =
        model::parse_attention_choice("vsa:sparsity=0.8,mode=compete,dense_layers=0/3,dense_first_n_steps=2");
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_TRUE(a->is_vsa());
    EXPECT_EQ(a->vsa.sparsity, 0.8);
    EXPECT_EQ(a->vsa.mode, model::VsaMode::kCompete);
    EXPECT_EQ(a->vsa.dense_layers, (std::vector<int>{0, 3}));
    EXPECT_EQ(a->layer_sparsity(3, 5), 0.0);
    EXPECT_EQ(a->layer_sparsity(1, 1), 0.0);
    EXPECT_EQ(a->layer_sparsity(1, 2), 0.8);
    EXPECT_EQ(a->describe(), "vsa(sparsity=0.8,mode=compete,dense_layers=0/3,dense_first_n_steps=2)");
    EXPECT_EQ(a->vsa.gate_add, model::VsaGateAdd::kSeparate);
    auto d = model::parse_attention_choice("vsa");
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->vsa.sparsity, 0.9);
    EXPECT_EQ(d->vsa.mode, model::VsaMode::kExempt);
    auto f = model::parse_attention_choice("vsa:gate_add=fused");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(f->vsa.gate_add, model::VsaGateAdd::kFused);
    EXPECT_EQ(f->describe(), "vsa(sparsity=0.9,mode=exempt,gate_add=fused)");
    EXPECT_EQ(model::parse_attention_choice("vsa:gate_add=separate").value().vsa.gate_add,
              model::VsaGateAdd::kSeparate);
    EXPECT_NE(model::parse_attention_choice("vsa:gate_add=late").status().message().find("gate_add 'late'"),
              std::string::npos);
    EXPECT_FALSE(model::parse_attention_choice("dense").value().is_vsa());
    for (const char* bad : {"sparse", "vsa:sparsity=1", "vsa:sparsity=-0.1", "vsa:mode=top", "vsa:k=1",
                            "vsa:dense_layers=a", "dense:x=1", "vsa:sparsity"})
        EXPECT_FALSE(model::parse_attention_choice(bad).ok()) << bad;
    EXPECT_NE(model::parse_attention_choice("vsa:sparsity=1.2").status().message().find("sparsity 1.2"),
              std::string::npos);
}

// ---- the job builder's `attention` field and the sidecar's defaults (pipeline/job_attention)
// -----------------------------------------------------------------------------------------
TEST(FastH3Job, SidecarDefaultsAndAttentionField) {
    const fs::path dir = temp_dir("job_fasth3");
    ASSERT_TRUE(
        model::write_tiny_checkpoint({.dir = dir.string(), .seed = 2, .variant = model::TinyVariant::kFastH3})
            .ok());
    auto store = runtime::ModelStore::open(dir.string(), runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    const runtime::CheckpointInfo& info = (*store)->info();
    ASSERT_TRUE(info.fasth3.has_value()); // the store read the sidecar
    EXPECT_EQ(info.fasth3->grid_rungs, (std::vector<int>{1000, 750, 500, 250}));
    const pipeline::JobBuilder builder(info);
    auto input = [] {
        pipeline::JobInput in;
        in.random_prompt_embeds = 5;
        in.size = "64x32";
        in.frames = 107;
        in.seed = 1;
        return in;
    };
    // defaulted: VSA at the trained sparsity on the rung schedule (5 grid points, 4 forwards)
    auto job = builder.build(input());
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_EQ(job->attention.describe(), "vsa(sparsity=0.9,mode=exempt)");
    EXPECT_EQ(job->steps, 5);
    EXPECT_EQ(job->rungs, (std::vector<int>{1000, 750, 500, 250}));
    // given: the field wins; num_inference_steps replaces the rungs
    auto in = input();
    in.attention = "dense";
    in.num_inference_steps = 3;
    job = builder.build(in);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_FALSE(job->attention.is_vsa());
    EXPECT_EQ(job->steps, 3);
    EXPECT_TRUE(job->rungs.empty());
    // errors start with and report the field, and name no flag
    auto expect_bad = [&](pipeline::JobInput bad, const std::string& needle, bool with_checkpoint) {
        std::string field;
        Status s = with_checkpoint ? builder.build(bad, &field).status()
                                   : pipeline::JobBuilder::check(bad, {}, &field);
        ASSERT_FALSE(s.ok()) << needle;
        EXPECT_EQ(field, "attention") << s.message();
        EXPECT_EQ(s.message().rfind("attention", 0), 0u) << s.message();
        EXPECT_EQ(s.message().find("--"), std::string::npos) << s.message();
        EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    };
    in = input();
    in.attention = "vsa:sparsity=1.5";
    expect_bad(in, "sparsity 1.5 must lie in [0, 1)", false);
    in.attention = "sparse";
    expect_bad(in, "must be dense or vsa", false);
    in.attention = "vsa:dense_layers=9"; // the tiny DiT has 2 blocks: only the checkpoint knows
    EXPECT_TRUE(pipeline::JobBuilder::check(in, {}).ok());
    expect_bad(in, "dense_layers holds block 9 but the DiT has 2 blocks", true);
    // ref2va (a reference given) under VSA: refused with the alternative named, before any checkpoint
    pipeline::JobInput ref;
    ref.prompt = "a ball";
    ref.size = "64x32";
    ref.frames = 107;
    pipeline::ReferenceMedia image;
    image.image = io::RgbImage(32, 32);
    ref.references.push_back(image);
    EXPECT_TRUE(pipeline::JobBuilder::check(ref, {}).ok());
    ref.attention = "vsa";
    expect_bad(ref, "ref2va is not supported", false);
    expect_bad(ref, "use attention dense", false);
    ref.attention = "dense";
    EXPECT_TRUE(pipeline::JobBuilder::check(ref, {}).ok());
}

} // namespace
