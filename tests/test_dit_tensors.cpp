// The DiT tensor inventory against the official index files, and the original↔diffusers name table.
#include "io/json_file.h"
#include "model/dit/dit_config.h"
#include "model/dit/dit_tensors.h"
#include "model/dit/random_weights.h"
#include "model/tiny/tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

using namespace h3;
using namespace h3::model;

namespace {
std::string official(const std::string& rel) {
    return std::string(H3_SOURCE_DIR) + "/../shared/h3-official/" + rel;
}

std::set<std::string> index_names(const std::string& path) {
    auto j = io::read_json_file(path);
    EXPECT_TRUE(j.ok()) << j.status().to_string();
    std::set<std::string> names;
    for (auto& [k, v] : j->at("weight_map").items()) names.insert(k);
    return names;
}

std::set<std::string> spec_names(const DitConfig& c, DitFormat f) {
    std::set<std::string> names;
    for (const auto& s : dit_tensor_specs(c, f))
        EXPECT_TRUE(names.insert(s.name).second) << "duplicate " << s.name;
    return names;
}
} // namespace

TEST(DitTensors, DiffusersNamesEqualTheOfficialIndex) {
    std::string idx = official("transformer/diffusion_pytorch_model.safetensors.index.json");
    if (!std::filesystem::exists(idx)) GTEST_SKIP() << "official files not present at " << idx;
    auto cfg = DitConfig::from_file(official("transformer/config.json"));
    ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
    EXPECT_EQ(spec_names(*cfg, DitFormat::kDiffusers), index_names(idx));
    EXPECT_EQ(spec_names(*cfg, DitFormat::kDiffusers),
              index_names(official("transformer_ref/diffusion_pytorch_model.safetensors.index.json")));
}

TEST(DitTensors, OriginalNamesEqualTheOfficialIndex) {
    std::string idx = official("FL2VA/transformer/model.safetensors.index.json");
    if (!std::filesystem::exists(idx)) GTEST_SKIP() << "official files not present at " << idx;
    auto cfg = DitConfig::from_file(official("FL2VA/transformer/config.json"));
    ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
    EXPECT_EQ(spec_names(*cfg, DitFormat::kOriginal), index_names(idx));
}

TEST(DitTensors, ParameterCountMatchesTheOfficialTotalSize) {
    std::string idx = official("transformer/diffusion_pytorch_model.safetensors.index.json");
    if (!std::filesystem::exists(idx)) GTEST_SKIP();
    auto cfg = DitConfig::from_file(official("transformer/config.json"));
    ASSERT_TRUE(cfg.ok());
    uint64_t bytes = 0;
    for (const auto& s : dit_tensor_specs(*cfg, DitFormat::kDiffusers))
        bytes += static_cast<uint64_t>(Shape(s.shape).numel()) * dtype_size(s.dtype);
    auto j = io::read_json_file(idx);
    EXPECT_EQ(bytes, j->at("metadata").at("total_size").get<uint64_t>());
    uint64_t orig = 0;
    for (const auto& s : dit_tensor_specs(*cfg, DitFormat::kOriginal))
        orig += static_cast<uint64_t>(Shape(s.shape).numel()) * dtype_size(s.dtype);
    auto jo = io::read_json_file(official("FL2VA/transformer/model.safetensors.index.json"));
    EXPECT_EQ(orig, jo->at("metadata").at("total_size").get<uint64_t>());
}

TEST(DitTensors, BothConfigFlavoursParseToTheSameConfig) {
    if (!std::filesystem::exists(official("transformer/config.json"))) GTEST_SKIP();
    auto a = DitConfig::from_file(official("transformer/config.json"));
    auto b = DitConfig::from_file(official("FL2VA/transformer/config.json"));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->to_diffusers_json(), b->to_diffusers_json());
    EXPECT_EQ(a->num_layers, 50);
    EXPECT_EQ(a->inner_dim(), 7168);
}

TEST(DitTensors, EveryOriginalNameMapsBackToDiffusersNames) {
    DitConfig c = tiny_dit_config();
    std::set<std::string> covered;
    for (const auto& s : dit_tensor_specs(c, DitFormat::kOriginal)) {
        auto m = map_original_name(s.name);
        ASSERT_TRUE(m.has_value()) << s.name;
        for (const auto& d : m->diffusers_names) {
            covered.insert(d);
            EXPECT_EQ(original_name_of(d), s.name);
        }
    }
    EXPECT_EQ(covered, spec_names(c, DitFormat::kDiffusers));
    EXPECT_FALSE(map_original_name("blocks.x.norm1.weight").has_value());
    EXPECT_FALSE(map_original_name("not_a_tensor").has_value());
}

TEST(DitTensors, QkvInterleaveRoundTripsAndPutsHeadsFirst) {
    DitConfig c = tiny_dit_config();
    TensorSpec spec{"transformer_blocks.0.attn.to_q.weight", {c.inner_dim(), c.hidden_size}, DType::kBF16};
    Tensor q = random_dit_tensor(spec, 1), k = random_dit_tensor(spec, 2), v = random_dit_tensor(spec, 3);
    Tensor qkv = interleave_qkv(q, k, v, c.num_attention_heads, c.attention_head_dim);
    // Row 0..hd-1 = head 0 of q; hd..2hd-1 = head 0 of k; 3hd = head 1 of q.
    const int hd = c.attention_head_dim;
    EXPECT_EQ(qkv.get({hd, 5}), k.get({0, 5}));
    EXPECT_EQ(qkv.get({3 * hd + 1, 7}), q.get({hd + 1, 7}));
    Tensor q2, k2, v2;
    split_qkv(qkv, c.num_attention_heads, hd, q2, k2, v2);
    EXPECT_EQ(std::memcmp(q2.data(), q.data(), q.nbytes()), 0);
    EXPECT_EQ(std::memcmp(v2.data(), v.data(), v.nbytes()), 0);
    Tensor sw = swap_row_halves(swap_row_halves(q));
    EXPECT_EQ(std::memcmp(sw.data(), q.data(), q.nbytes()), 0);
}

TEST(DitTensors, RandomWeightsAreDeterministic) {
    TensorSpec spec{"proj_in.weight", {64, 96}, DType::kF32};
    Tensor a = random_dit_tensor(spec, 5), b = random_dit_tensor(spec, 5), c = random_dit_tensor(spec, 6);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
    EXPECT_NE(std::memcmp(a.data(), c.data(), a.nbytes()), 0);
}

TEST(DitConfig, RejectsBadValues) {
    nlohmann::json j = tiny_dit_config().to_diffusers_json();
    j["rope_freq_dim"] = 64; // 6·64 > head_dim 32
    auto r = DitConfig::from_json(j, "cfg.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("rope_freq_dim"), std::string::npos);
    j = tiny_dit_config().to_diffusers_json();
    j["num_layers"] = "two";
    r = DitConfig::from_json(j, "cfg.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("num_layers"), std::string::npos);
}

#include "io/checkpoint.h"

#include <regex>

// make-tiny's transformer holds exactly the official index's names, with blocks and refiner blocks cut to
// the tiny config's counts — in both layouts.
TEST(DitTensors, TinyCheckpointNamesFollowTheOfficialIndex) {
    std::string d_idx = official("transformer/diffusion_pytorch_model.safetensors.index.json");
    std::string o_idx = official("FL2VA/transformer/model.safetensors.index.json");
    if (!std::filesystem::exists(d_idx) || !std::filesystem::exists(o_idx)) GTEST_SKIP();
    const DitConfig tiny = tiny_dit_config();
    auto keep = [&](const std::string& n) {
        static const std::regex block(R"(^(transformer_blocks|blocks)\.(\d+)\.)");
        static const std::regex refiner(R"(^token_refiner\.(refiner_blocks|blocks)\.(\d+)\.)");
        std::smatch m;
        if (std::regex_search(n, m, refiner)) return std::stoi(m[2]) < tiny.num_refiner_layers;
        if (std::regex_search(n, m, block)) return std::stoi(m[2]) < tiny.num_layers;
        return true;
    };
    for (auto [layout, idx, sub] :
         {std::tuple{TinyLayout::kDiffusers, d_idx, std::string("transformer")},
          std::tuple{TinyLayout::kOriginal, o_idx, std::string("FL2VA/transformer")}}) {
        std::string dir = std::string(H3_BINARY_DIR) + "/tiny_names_" + std::to_string(int(layout));
        std::filesystem::remove_all(dir);
        ASSERT_TRUE(write_tiny_checkpoint({.dir = dir, .seed = 4, .layout = layout}).ok());
        auto set = io::TensorSet::open(dir + "/" + sub);
        ASSERT_TRUE(set.ok()) << set.status().to_string();
        std::set<std::string> want;
        for (const auto& n : index_names(idx))
            if (keep(n)) want.insert(n);
        std::vector<std::string> got_v = set->names();
        EXPECT_EQ(std::set<std::string>(got_v.begin(), got_v.end()), want);
        // dtypes as in the official checkpoint: fp32 islands, bf16 elsewhere
        for (const auto& n : got_v) {
            bool fp32 = set->info(n)->dtype == DType::kF32;
            auto m = map_original_name(n);
            std::string dname = layout == TinyLayout::kOriginal && m && !m->diffusers_names.empty()
                                    ? m->diffusers_names[0]
                                    : n;
            EXPECT_EQ(fp32, is_fp32_island(dname) || n == "rope.inv_freq") << n;
        }
    }
}
