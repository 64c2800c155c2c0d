// LoRA files: every published key layout converts to the same canonical delta, the alpha/rank rules per
// layout, the fused-qkv split (stacked and per-head rows), the fc1 half swap, and the errors a bad file gets.
#include "cli/adapter_options.h"
#include "lora_test_data.h"
#include "model/lora/lora_file.h"
#include "model/lora/lora_keys.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace h3;
using namespace h3::lora_test;
namespace fs = std::filesystem;

namespace {

const model::DitConfig& cfg() {
    static const model::DitConfig c = model::tiny_dit_config();
    return c;
}

// delta = scale·B·A in double, per target.
std::map<LoraTarget, std::vector<double>> deltas(const model::LoraAdapter& a) {
    std::map<LoraTarget, std::vector<double>> out;
    for (const auto& f : a.factors) {
        auto av = *to_f32_vector(f.a), bv = *to_f32_vector(f.b);
        const int64_t r = f.rank(), in = f.a.dim(1), o = f.b.dim(0);
        std::vector<double> d(static_cast<size_t>(o * in), 0.0);
        for (int64_t i = 0; i < o; ++i)
            for (int64_t k = 0; k < r; ++k)
                for (int64_t j = 0; j < in; ++j)
                    d[static_cast<size_t>(i * in + j)] += double(f.scale) *
                                                          bv[static_cast<size_t>(i * r + k)] *
                                                          av[static_cast<size_t>(k * in + j)];
        EXPECT_FALSE(out.count(f.target)) << model::lora_target_name(f.target);
        out[f.target] = std::move(d);
    }
    return out;
}

std::map<LoraTarget, std::vector<double>> reference_deltas(const RefFactors& ref) {
    model::LoraAdapter a;
    for (const auto& [t, f] : ref) a.factors.push_back({t, f.a, f.b, 1.0f});
    return deltas(a);
}

double max_diff(const std::map<LoraTarget, std::vector<double>>& x,
                const std::map<LoraTarget, std::vector<double>>& y) {
    EXPECT_EQ(x.size(), y.size());
    double m = 0;
    for (const auto& [t, d] : x) {
        auto it = y.find(t);
        if (it == y.end()) {
            ADD_FAILURE() << "missing target " << model::lora_target_name(t);
            continue;
        }
        for (size_t i = 0; i < d.size(); ++i) m = std::max(m, std::fabs(d[i] - it->second[i]));
    }
    return m;
}

Result<model::LoraAdapter> convert(const Tensors& t, model::LoraReadOptions o = {},
                                   const std::map<std::string, std::string>& md = {}) {
    return model::convert_lora_tensors(t, md, cfg(), o, "test.safetensors");
}

std::string tmp_path(const std::string& name) {
    const fs::path d = fs::path(H3_BINARY_DIR) / "test_lora";
    fs::create_directories(d);
    return (d / name).string();
}

void expect_error(const Result<model::LoraAdapter>& r, const std::string& needle) {
    ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
}

} // namespace

TEST(LoraTargets, NamesRoundTripAndShapes) {
    const auto& c = cfg();
    const auto all = model::all_lora_targets(c);
    // 7 per DiT block, 6 per refiner block, the final AdaLN.
    EXPECT_EQ(all.size(), size_t(7 * c.num_layers + 6 * c.num_refiner_layers + 1));
    for (const auto& t : all) {
        auto back = model::parse_lora_target(model::lora_target_name(t));
        ASSERT_TRUE(back) << model::lora_target_name(t);
        EXPECT_EQ(*back, t);
        EXPECT_TRUE(model::lora_target_exists(c, t));
    }
    EXPECT_EQ(model::lora_target_name({model::LoraSite::kRefiner, 0, LoraProjection::kFfOut}),
              "token_refiner.refiner_blocks.0.ff.net.2");
    EXPECT_FALSE(model::parse_lora_target("token_refiner.refiner_blocks.0.adaln_proj.linear"));
    EXPECT_FALSE(model::parse_lora_target("context_embedder"));
    auto s = model::lora_target_shape(c, {model::LoraSite::kBlock, 1, LoraProjection::kFfIn});
    EXPECT_EQ(s.out, 2 * c.ffn_dim);
    EXPECT_EQ(s.in, c.hidden_size);
}

TEST(LoraKeys, EveryLayoutSpellingResolves) {
    const model::LoraVocabulary v(cfg());
    struct Case {
        const char* key;
        const char* module;
        model::LoraPart part;
    };
    for (const Case& k : std::vector<Case>{
             {"transformer.transformer_blocks.1.attn.to_k.lora_A.weight", "transformer_blocks.1.attn.to_k",
              model::LoraPart::kA},
             {"base_model.model.transformer_blocks.0.ff.net.2.lora_B.default.weight",
              "transformer_blocks.0.ff.net.2", model::LoraPart::kB},
             {"transformer_blocks.0.attn.to_out.0.alpha", "transformer_blocks.0.attn.to_out.0",
              model::LoraPart::kAlpha},
             {"lora_unet_transformer_blocks_1_ff_net_0_proj.lora_up.weight",
              "transformer_blocks.1.ff.net.0.proj", model::LoraPart::kB},
             {"lora_unet_blocks_0_attn_qkv_proj.lora_down.weight", "blocks.0.attn.qkv_proj",
              model::LoraPart::kA},
             {"lora_unet_token_refiner_blocks_0_mlp_fc1.alpha", "token_refiner.blocks.0.mlp.fc1",
              model::LoraPart::kAlpha},
             {"diffusion_model.final_layer.adaln_proj.linear.lora_A.weight", "final_layer.adaln_proj.linear",
              model::LoraPart::kA},
             {"blocks.1.adaln_proj.linear.lora_B.default.weight", "blocks.1.adaln_proj.linear",
              model::LoraPart::kB},
             {"transformer.norm_out.linear.lora.up.weight", "norm_out.linear", model::LoraPart::kB},
         }) {
        auto p = model::parse_lora_key(k.key, v);
        ASSERT_TRUE(p.recognized && p.module) << k.key;
        EXPECT_EQ(p.module->name, k.module) << k.key;
        EXPECT_EQ(p.part, k.part) << k.key;
        EXPECT_TRUE(p.module->adapted) << k.key;
    }
    auto ctx = model::parse_lora_key("diffusion_model.condition_proj.lora_A.weight", v);
    ASSERT_TRUE(ctx.module);
    EXPECT_FALSE(ctx.module->adapted); // a real DiT Linear that h3-engine does not adapt
    EXPECT_FALSE(
        model::parse_lora_key("lora_te_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", v).module);
    EXPECT_TRUE(model::parse_lora_key("blocks.0.attn.qkv_proj.dora_scale", v).variant);
}

// Every layout, written from one set of factors, converts to the same deltas — exactly.
TEST(LoraFormats, EveryLayoutGivesTheReferenceDelta) {
    const RefFactors ref = reference_factors(cfg(), 11);
    const auto want = reference_deltas(ref);
    for (Layout l : all_layouts()) {
        SCOPED_TRACE(layout_name(l));
        auto a = convert(write_layout(cfg(), ref, l));
        ASSERT_TRUE(a.ok()) << a.status().to_string();
        EXPECT_EQ(a->format, layout_name(l));
        EXPECT_TRUE(a->ignored.empty());
        EXPECT_EQ(a->factors.size(), want.size());
        EXPECT_EQ(max_diff(deltas(*a), want), 0.0);
        // Block-diagonal fused q/k/v factors are compacted back to rank 4 each.
        for (const auto& f : a->factors) EXPECT_EQ(f.rank(), kRank) << model::lora_target_name(f.target);
    }
}

TEST(LoraFormats, ReadsFromAFileTheSameAsInMemory) {
    const RefFactors ref = reference_factors(cfg(), 12);
    const std::string p = tmp_path("musubi.safetensors");
    ASSERT_TRUE(io::write_safetensors(p, write_layout(cfg(), ref, Layout::kMusubi)).ok());
    auto a = model::read_lora_file(p, cfg());
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_EQ(a->source, p);
    EXPECT_EQ(max_diff(deltas(*a), reference_deltas(ref)), 0.0);
    EXPECT_NE(a->summary().find("musubi"), std::string::npos);
    // write_lora_file normalizes any layout into diffusers/PEFT with .alpha; it reads back to the same
    // deltas.
    const std::string q = tmp_path("normalized.safetensors");
    ASSERT_TRUE(model::write_lora_file(q, *a).ok());
    auto b = model::read_lora_file(q, cfg());
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->format, "peft");
    EXPECT_EQ(max_diff(deltas(*b), reference_deltas(ref)), 0.0);
}

TEST(LoraFormats, FusedQkvRowOrderAndSharedA) {
    // One shared A (rank 4) for q/k/v, B rows in the official per-head order, original names: read as
    // per-head it equals separate to_q/to_k/to_v factors with that A; read as stacked it does not.
    const auto& c = cfg();
    RefFactors ref = reference_factors(c, 13);
    LoraTarget q{model::LoraSite::kBlock, 0, LoraProjection::kToQ}, k = q, v = q;
    k.proj = LoraProjection::kToK;
    v.proj = LoraProjection::kToV;
    ref[k].a = ref[q].a;
    ref[v].a = ref[q].a;
    Tensors t = {
        {"blocks.0.attn.qkv_proj.lora_A.weight", ref[q].a},
        {"blocks.0.attn.qkv_proj.lora_B.weight",
         model::interleave_qkv(ref[q].b, ref[k].b, ref[v].b, c.num_attention_heads, c.attention_head_dim)}};
    RefFactors only = {{q, ref[q]}, {k, ref[k]}, {v, ref[v]}};
    auto per_head = convert(t, {.qkv_rows = model::LoraQkvRows::kPerHead});
    ASSERT_TRUE(per_head.ok()) << per_head.status().to_string();
    EXPECT_EQ(max_diff(deltas(*per_head), reference_deltas(only)), 0.0);
    // q, k and v keep the one A (no zero columns to drop).
    EXPECT_EQ(per_head->factors[0].a.data(), per_head->factors[1].a.data());
    auto stacked = convert(t); // original names without .default. are ComfyUI's stacked order by default
    ASSERT_TRUE(stacked.ok());
    EXPECT_GT(max_diff(deltas(*stacked), reference_deltas(only)), 1e-3);
    // DiffSynth's .default. infix selects the per-head order automatically.
    Tensors d = {{"blocks.0.attn.qkv_proj.lora_A.default.weight", t[0].tensor},
                 {"blocks.0.attn.qkv_proj.lora_B.default.weight", t[1].tensor}};
    auto ds = convert(d);
    ASSERT_TRUE(ds.ok());
    EXPECT_EQ(ds->format, "diffsynth");
    EXPECT_EQ(max_diff(deltas(*ds), reference_deltas(only)), 0.0);
}

TEST(LoraFormats, AlphaFromMetadataAndDefaults) {
    const RefFactors ref = reference_factors(cfg(), 14);
    const LoraTarget q{model::LoraSite::kBlock, 1, LoraProjection::kToQ};
    Tensors t = {{"transformer.transformer_blocks.1.attn.to_q.lora_A.weight", ref.at(q).a},
                 {"transformer.transformer_blocks.1.attn.to_q.lora_B.weight", ref.at(q).b}};
    auto plain = convert(t);
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->factors[0].scale, 1.0f); // no alpha anywhere: alpha = rank
    auto meta =
        convert(t, {}, {{"lora_adapter_metadata", R"({"transformer.r": 4, "transformer.lora_alpha": 8})"}});
    ASSERT_TRUE(meta.ok()) << meta.status().to_string();
    EXPECT_EQ(meta->factors[0].scale, 2.0f);
    auto pattern = convert(
        t, {},
        {{"lora_adapter_metadata", R"({"r": 4, "lora_alpha": 8, "alpha_pattern": {"attn.to_q": 2}})"}});
    ASSERT_TRUE(pattern.ok());
    EXPECT_EQ(pattern->factors[0].scale, 0.5f);
    auto rs = convert(t, {}, {{"lora_adapter_metadata", R"({"r": 4, "lora_alpha": 8, "use_rslora": true})"}});
    ASSERT_TRUE(rs.ok());
    EXPECT_EQ(rs->factors[0].scale, 4.0f);
    expect_error(convert(t, {}, {{"lora_adapter_metadata", R"({"r": 16, "lora_alpha": 16})"}}), "rank 16");
    expect_error(convert(t, {}, {{"lora_adapter_metadata", R"({"r": 4, "use_dora": true})"}}), "DoRA");
    // the metadata is file data: its JSON nesting is bounded like every other parse of outside JSON
    expect_error(
        convert(t, {}, {{"lora_adapter_metadata", std::string(100000, '[') + std::string(100000, ']')}}),
        "test.safetensors: __metadata__ lora_adapter_metadata: JSON nests deeper than 64 levels");
}

TEST(LoraFormats, BadFilesGetClearErrors) {
    const auto& c = cfg();
    const RefFactors ref = reference_factors(c, 15);
    const LoraTarget q{model::LoraSite::kBlock, 0, LoraProjection::kToQ};
    const Tensor a = ref.at(q).a, b = ref.at(q).b;
    const std::string m = "transformer_blocks.0.attn.to_q";
    // wrong shapes: A for a 32-wide input (the DiT's to_q takes 64)
    expect_error(convert({{m + ".lora_A.weight", Tensor::host(Shape{4, 32}, DType::kBF16)},
                          {m + ".lora_B.weight", b}}),
                 "shape mismatch");
    expect_error(convert({{m + ".lora_A.weight", Tensor::host(Shape{4, 32}, DType::kBF16)},
                          {m + ".lora_B.weight", b}}),
                 "module " + m);
    // rank mismatch between A and B
    expect_error(convert({{m + ".lora_A.weight", a},
                          {m + ".lora_B.weight", Tensor::host(Shape{64, 3}, DType::kBF16)}}),
                 "rank mismatch");
    // a factor without its partner
    expect_error(convert({{m + ".lora_A.weight", a}}), "no lora_B");
    // a pruned-AdaLN adapter (input width 8) does not fit the full model
    expect_error(
        convert({{"blocks.0.adaln_proj.linear.lora_A.weight", Tensor::host(Shape{4, 8}, DType::kBF16)},
                 {"blocks.0.adaln_proj.linear.lora_B.weight",
                  Tensor::host(Shape{c.adaln_out_features(), 4}, DType::kBF16)}}),
        "shape mismatch");
    // non-float factors, non-scalar alpha
    expect_error(
        convert({{m + ".lora_A.weight", Tensor::host(Shape{4, 64}, DType::kI32)}, {m + ".lora_B.weight", b}}),
        "float");
    expect_error(convert({{m + ".lora_A.weight", a},
                          {m + ".lora_B.weight", b},
                          {m + ".alpha", Tensor::host(Shape{2}, DType::kF32)}}),
                 "alpha must be one float");
    // DoRA / LoKr tensors are refused, not dropped
    expect_error(convert({{m + ".lora_A.weight", a},
                          {m + ".lora_B.weight", b},
                          {m + ".lora_magnitude_vector.weight", Tensor::host(Shape{64}, DType::kBF16)}}),
                 "DoRA");
    // two modules adapting one target
    expect_error(
        convert({{m + ".lora_A.weight", a},
                 {m + ".lora_B.weight", b},
                 {"blocks.0.attn.qkv_proj.lora_A.weight", a},
                 {"blocks.0.attn.qkv_proj.lora_B.weight", Tensor::host(Shape{192, 4}, DType::kBF16)}}),
        "both adapt");
    // the same factor twice
    expect_error(convert({{m + ".lora_A.weight", a},
                          {"transformer." + m + ".lora_A.weight", a},
                          {m + ".lora_B.weight", b}}),
                 "same factor");
    // nothing that names this DiT
    expect_error(convert({{"lora_te_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", a}}),
                 "no LoRA factor names a projection");
    expect_error(convert({}), "no tensors");
    // not a safetensors file: the error names the file
    const std::string junk = tmp_path("junk.safetensors");
    {
        std::FILE* f = std::fopen(junk.c_str(), "wb");
        std::fputs("this is not a safetensors file", f);
        std::fclose(f);
    }
    auto r = model::read_lora_file(junk, c);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("junk.safetensors"), std::string::npos) << r.status().to_string();
}

TEST(LoraFormats, UnknownKeysWarnOrFailWhenStrict) {
    const RefFactors ref = reference_factors(cfg(), 16);
    Tensors t = write_layout(cfg(), ref, Layout::kOriginal);
    const size_t good = t.size();
    t.push_back({"diffusion_model.condition_proj.lora_A.weight", Tensor::host(Shape{4, 64}, DType::kBF16)});
    t.push_back({"diffusion_model.condition_proj.lora_B.weight", Tensor::host(Shape{64, 4}, DType::kBF16)});
    t.push_back({"lora_te_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", ref.begin()->second.a});
    auto lax = convert(t);
    ASSERT_TRUE(lax.ok()) << lax.status().to_string();
    EXPECT_EQ(lax->ignored.size(), 3u);
    EXPECT_EQ(max_diff(deltas(*lax), reference_deltas(ref)), 0.0);
    EXPECT_NE(lax->summary().find("3 keys ignored"), std::string::npos);
    auto strict = convert(t, {.strict = true});
    expect_error(strict, "3 of " + std::to_string(good + 3) + " keys");
    expect_error(strict, "diffusion_model.condition_proj.lora_A.weight");
    expect_error(strict, "lora_te_text_model_encoder_layers_0_mlp_fc1.lora_down.weight");
}

TEST(LoraCli, SpecParsing) {
    auto a = cli::parse_lora_spec("turbo.safetensors");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->path, "turbo.safetensors");
    EXPECT_EQ(a->scale, 1.0);
    auto b = cli::parse_lora_spec("dir/turbo.safetensors:0.75");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->path, "dir/turbo.safetensors");
    EXPECT_EQ(b->scale, 0.75);
    auto c = cli::parse_lora_spec("odd:name.safetensors"); // not a number after the colon: part of the name
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->path, "odd:name.safetensors");
    auto d = cli::parse_lora_spec("x.safetensors:-0.5");
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->scale, -0.5);
    EXPECT_FALSE(cli::parse_lora_spec("x.safetensors:inf").ok());
    EXPECT_FALSE(cli::parse_lora_spec(":0.5").ok());
}
