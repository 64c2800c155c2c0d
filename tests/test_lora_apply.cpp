// Applying LoRA adapters on the tiny DiT (CPU): generate with every key layout gives identical latents, scale
// 0 equals no adapter, adapters add, merged and run-time application agree (fp32 closely, bf16 within its
// rounding), AdaLN adapters reach the AdaLN tables, and a set built for one request leaves the model as it
// was.
#include "lora_test_data.h"
#include "model/dit/dit_model.h"
#include "model/latent_spec.h"
#include "model/lora/lora_apply.h"
#include "model/lora/lora_file.h"
#include "model/lora/lora_set.h"
#include "pipeline/generate.h"
#include "pipeline/geometry.h"
#include "runtime/adapter_library.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

using namespace h3;
using namespace h3::lora_test;
namespace fs = std::filesystem;

namespace {

const model::DitConfig& cfg() {
    static const model::DitConfig c = model::tiny_dit_config();
    return c;
}

const std::string& tiny_dir() {
    static const std::string d = [] {
        const fs::path p = fs::path(H3_BINARY_DIR) / "test_lora_apply" / "tiny";
        fs::remove_all(p);
        EXPECT_TRUE(model::write_tiny_checkpoint({.dir = p.string(), .seed = 5}).ok());
        return p.string();
    }();
    return d;
}

std::unique_ptr<model::DitModel> load(model::DitPrecision prec) {
    auto ck = model::open_dit_checkpoint(tiny_dir());
    EXPECT_TRUE(ck.ok()) << ck.status().to_string();
    auto m = model::DitModel::load(*ck, {.device = Device::cpu(), .precision = prec}, ops::Context::cpu());
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return std::move(m).value();
}

pipeline::Conditioning conditioning() {
    pipeline::Conditioning c;
    c.embeddings = Tensor::host(Shape{6, cfg().text_dim}, DType::kF32);
    EXPECT_TRUE(ops::fill_uniform(ops::Context::cpu(), {.seed = 3, .bound = 1.0f}, c.embeddings).ok());
    c.tags.assign(6, pipeline::kTagText);
    return c;
}

pipeline::GenerationRequest request() {
    pipeline::GenerationRequest rq;
    const model::DitConfig c = model::tiny_dit_config(); // the latent space is the tiny DiT's
    auto spec = model::derive_latent_spec({.dit = &c, .dit_file = "the tiny DiT config"});
    EXPECT_TRUE(spec.ok()) << spec.status().to_string();
    auto g = pipeline::resolve_geometry({.width = 64, .height = 32, .frames = 107}, *spec);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    rq.geometry = *g;
    rq.steps = 3;
    rq.seed = 21;
    return rq;
}

struct Latents {
    std::vector<float> video, audio;
};

Latents generate(const model::DitModel& m, const model::LoraSet* lora = nullptr) {
    pipeline::DenoiseOptions o;
    o.lora = lora;
    auto out = pipeline::generate_latents(m, conditioning(), request(), o);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok()) return {};
    return {*to_f32_vector(out->video_latents), *to_f32_vector(out->audio_latents)};
}

// max |a − b| / max |b|
double rel(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        num = std::max(num, std::fabs(double(a[i]) - b[i]));
        den = std::max(den, std::fabs(double(b[i])));
    }
    return den > 0 ? num / den : num;
}
double rel(const Latents& a, const Latents& b) {
    return std::max(rel(a.video, b.video), rel(a.audio, b.audio));
}

std::shared_ptr<const model::LoraAdapter> adapter_from(const Tensors& t, const std::string& label = "x") {
    auto a = model::convert_lora_tensors(t, {}, cfg(), {}, label);
    EXPECT_TRUE(a.ok()) << a.status().to_string();
    return std::make_shared<const model::LoraAdapter>(std::move(a).value());
}

std::shared_ptr<const model::LoraSet> runtime_set(const model::DitModel& m,
                                                  std::vector<model::LoraUse> uses) {
    auto s = model::LoraSet::build(uses, m.config(), m.context(), m.act_dtype());
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? *s : nullptr;
}

// The reference factors strong enough to move the tiny model visibly (B up to 0.03 against unit-scale A: ~15%
// of W).
const RefFactors& strong_ref() {
    static const RefFactors r = reference_factors(cfg(), 31, 0.03f);
    return r;
}

} // namespace

// generate with the same adapter in each layout: identical latents (the converted factors are the same
// numbers, the scales powers of two), and different from no adapter.
TEST(LoraApply, EveryLayoutGivesIdenticalLatents) {
    auto m = load(model::DitPrecision::kBf16);
    const Latents base = generate(*m);
    Latents first;
    for (Layout l : all_layouts()) {
        SCOPED_TRACE(layout_name(l));
        auto set = runtime_set(*m, {{adapter_from(write_layout(cfg(), strong_ref(), l)), 1.0f}});
        const Latents got = generate(*m, set.get());
        if (l == Layout::kDiffusers) {
            first = got;
            EXPECT_GT(rel(got, base), 1e-2) << "the adapter must change the result";
        } else {
            EXPECT_EQ(got.video, first.video);
            EXPECT_EQ(got.audio, first.audio);
        }
    }
    // The request's set left the model untouched.
    const Latents again = generate(*m);
    EXPECT_EQ(again.video, base.video);
    EXPECT_EQ(again.audio, base.audio);
}

TEST(LoraApply, ScaleZeroEqualsNoAdapter) {
    auto m = load(model::DitPrecision::kBf16);
    const Latents base = generate(*m);
    auto adapter = adapter_from(write_layout(cfg(), strong_ref(), Layout::kPeft));
    auto zero = runtime_set(*m, {{adapter, 0.0f}});
    EXPECT_TRUE(zero->empty());
    const Latents z = generate(*m, zero.get());
    EXPECT_EQ(z.video, base.video);
    EXPECT_EQ(z.audio, base.audio);
    ASSERT_TRUE(m->merge_adapters({{adapter, 0.0f}}).ok());
    const Latents zm = generate(*m);
    EXPECT_EQ(zm.video, base.video);
    EXPECT_EQ(zm.audio, base.audio);
    EXPECT_TRUE(m->merged_adapters().empty());
}

// Merged and run-time application of the same set: fp32 agrees to accumulation order, bf16 within its
// rounding (far below the adapter's own effect).
TEST(LoraApply, MergedAndRuntimeAgree) {
    auto adapter = adapter_from(write_layout(cfg(), strong_ref(), Layout::kOriginal));
    for (auto prec : {model::DitPrecision::kFp32, model::DitPrecision::kBf16}) {
        SCOPED_TRACE(model::precision_name(prec));
        auto m = load(prec);
        const Latents base = generate(*m);
        auto set = runtime_set(*m, {{adapter, 0.8f}});
        const Latents runtime = generate(*m, set.get());
        ASSERT_TRUE(m->merge_adapters({{adapter, 0.8f}}).ok());
        EXPECT_FALSE(m->merged_adapters().empty());
        const Latents merged = generate(*m);
        const double effect = rel(runtime, base), gap = rel(merged, runtime);
        EXPECT_GT(effect, 1e-2);
        if (prec == model::DitPrecision::kFp32)
            EXPECT_LT(gap, 1e-5);
        else
            EXPECT_LT(gap, 0.1 * effect) << "effect " << effect << ", merged vs runtime " << gap;
    }
}

// Two adapters add: merged {X: 1, Y: 0.5} is W + dX + 0.5·dY (fp32, one rounding), and at run time the pair
// equals one adapter holding both factor sets.
TEST(LoraApply, TwoAdaptersAdd) {
    const RefFactors rx = reference_factors(cfg(), 41, 0.03f), ry = reference_factors(cfg(), 52, 0.03f);
    auto x = adapter_from(write_layout(cfg(), rx, Layout::kKohya), "x");
    auto y = adapter_from(write_layout(cfg(), ry, Layout::kDiffSynth), "y");
    // Weight level, one target: the fp32 model's to_v of block 1.
    auto ck = model::open_dit_checkpoint(tiny_dir());
    ASSERT_TRUE(ck.ok());
    auto w0 = model::load_dit_tensor(*ck, "transformer_blocks.1.attn.to_v.weight",
                                     {.device = Device::cpu(), .precision = model::DitPrecision::kFp32});
    ASSERT_TRUE(w0.ok());
    Tensor w = *w0->to(Device::cpu());
    std::vector<model::LoraMergeTerm> terms;
    const LoraTarget tv{model::LoraSite::kBlock, 1, LoraProjection::kToV};
    for (auto [ad, s] : {std::pair{x.get(), 1.0f}, {y.get(), 0.5f}})
        for (const auto& f : ad->factors)
            if (f.target == tv) terms.push_back({&f, s});
    ASSERT_EQ(terms.size(), 2u);
    ASSERT_TRUE(model::lora_merge(ops::Context::cpu(), terms, w).ok());
    auto base = *to_f32_vector(*w0), got = *to_f32_vector(w);
    auto xa = *to_f32_vector(rx.at(tv).a), xb = *to_f32_vector(rx.at(tv).b);
    auto ya = *to_f32_vector(ry.at(tv).a), yb = *to_f32_vector(ry.at(tv).b);
    const int64_t out = w.dim(0), in = w.dim(1);
    double err = 0, moved = 0;
    for (int64_t i = 0; i < out; ++i)
        for (int64_t j = 0; j < in; ++j) {
            double d = base[size_t(i * in + j)];
            for (int64_t k = 0; k < kRank; ++k)
                d += double(xb[size_t(i * kRank + k)]) * xa[size_t(k * in + j)] +
                     0.5 * double(yb[size_t(i * kRank + k)]) * ya[size_t(k * in + j)];
            err = std::max(err, std::fabs(d - got[size_t(i * in + j)]));
            moved = std::max(moved, std::fabs(d - base[size_t(i * in + j)]));
        }
    EXPECT_LT(err, 1e-5);
    EXPECT_GT(moved, 1e-2);
    // Generate level: {x, y} at run time equals the adapter whose factors are both sets (fp32).
    auto m = load(model::DitPrecision::kFp32);
    auto pair = runtime_set(*m, {{x, 1.0f}, {y, 1.0f}});
    model::LoraAdapter both;
    both.source = "both";
    for (const auto* ad : {x.get(), y.get()})
        for (const auto& f : ad->factors) both.factors.push_back(f);
    auto joined = runtime_set(*m, {{std::make_shared<const model::LoraAdapter>(both), 1.0f}});
    const Latents a = generate(*m, pair.get()), b = generate(*m, joined.get());
    EXPECT_EQ(a.video, b.video);
    EXPECT_EQ(a.audio, b.audio);
    const Latents only_x = generate(*m, runtime_set(*m, {{x, 1.0f}}).get());
    EXPECT_GT(rel(a, only_x), 1e-3);
}

// AdaLN adapters (blocks and final layer) change the AdaLN tables; run time and merged agree on them.
TEST(LoraApply, AdalnAdaptersReachTheTables) {
    RefFactors adaln;
    for (const auto& [t, f] : strong_ref())
        if (t.proj == LoraProjection::kAdaln) adaln[t] = f;
    ASSERT_EQ(adaln.size(), size_t(cfg().num_layers + 1));
    auto adapter = adapter_from(write_layout(cfg(), adaln, Layout::kOriginal));
    auto m = load(model::DitPrecision::kFp32);
    const std::vector<float> ts = {0.25f, 0.75f};
    auto base = m->compute_adaln_tables(ts);
    ASSERT_TRUE(base.ok());
    auto set = runtime_set(*m, {{adapter, 1.0f}});
    auto rt = m->compute_adaln_tables(ts, nullptr, nullptr, set.get());
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    ASSERT_TRUE(m->merge_adapters({{adapter, 1.0f}}).ok());
    auto merged = m->compute_adaln_tables(ts);
    ASSERT_TRUE(merged.ok());
    for (size_t b = 0; b <= rt->blocks.size(); ++b) {
        const Tensor& r = b < rt->blocks.size() ? rt->blocks[b] : rt->final_layer;
        const Tensor& g = b < rt->blocks.size() ? merged->blocks[b] : merged->final_layer;
        const Tensor& o = b < rt->blocks.size() ? base->blocks[b] : base->final_layer;
        EXPECT_GT(rel(*to_f32_vector(r), *to_f32_vector(o)), 1e-3) << "table " << b;
        EXPECT_LT(rel(*to_f32_vector(g), *to_f32_vector(r)), 1e-5) << "table " << b;
    }
}

TEST(LoraApply, SetChecksTargetsAndScratch) {
    auto m = load(model::DitPrecision::kFp32);
    model::LoraSet set(cfg());
    model::LoraDeviceFactor f{Tensor::host(Shape{2, 64}, DType::kF32),
                              Tensor::host(Shape{64, 2}, DType::kF32), 1};
    EXPECT_TRUE(set.add({model::LoraSite::kBlock, 0, LoraProjection::kToQ}, f).ok());
    EXPECT_FALSE(set.add({model::LoraSite::kBlock, 9, LoraProjection::kToQ}, f).ok());   // no block 9
    EXPECT_FALSE(set.add({model::LoraSite::kBlock, 0, LoraProjection::kFfOut}, f).ok()); // ff.net.2 takes 128
    EXPECT_EQ(set.factor_count(), 1u);
    EXPECT_NE(set.block(0), nullptr);
    EXPECT_EQ(set.block(1), nullptr);
    EXPECT_EQ(set.refiner(0), nullptr);
    // A scratch without room for the adapters is an error, not an overrun.
    auto packed_rows = int64_t{16};
    auto sc = m->make_scratch(packed_rows, 1 << 20);
    ASSERT_TRUE(sc.ok());
    model::DitForwardOptions fo;
    fo.lora = &set;
    Tensor h = Tensor::host(Shape{packed_rows, 64}, DType::kF32);
    model::DitModel::RowTables rows;
    Status s = m->run_block(0, h, Tensor(), rows, fo, *sc);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("run-time adapters"), std::string::npos) << s.to_string();
}

// The server's adapter folder: names resolve only inside it, sets are loaded once, shared, reloaded when the
// file changes and dropped past the byte budget; a request's combination equals building it directly.
TEST(AdapterLibrary, PathsCacheAndCombination) {
    const fs::path root = fs::path(H3_BINARY_DIR) / "test_lora_apply" / "library";
    fs::remove_all(root);
    fs::create_directories(root / "loras" / "sub");
    fs::create_directories(root / "outside");
    const RefFactors rx = reference_factors(cfg(), 61, 0.03f), ry = reference_factors(cfg(), 62, 0.03f);
    ASSERT_TRUE(io::write_safetensors((root / "loras" / "x.safetensors").string(),
                                      write_layout(cfg(), rx, Layout::kPeft))
                    .ok());
    ASSERT_TRUE(io::write_safetensors((root / "loras" / "sub" / "y.safetensors").string(),
                                      write_layout(cfg(), ry, Layout::kOriginal))
                    .ok());
    ASSERT_TRUE(io::write_safetensors((root / "outside" / "z.safetensors").string(),
                                      write_layout(cfg(), ry, Layout::kPeft))
                    .ok());
    fs::create_symlink(root / "outside" / "z.safetensors", root / "loras" / "escape.safetensors");
    fs::create_symlink(root / "loras" / "x.safetensors", root / "loras" / "alias.safetensors");
    auto m = load(model::DitPrecision::kFp32);
    auto lib = runtime::AdapterLibrary::open({.dir = (root / "loras").string(),
                                              .config = cfg(),
                                              .ctx = ops::Context::cpu(),
                                              .dtype = m->act_dtype(),
                                              .read = {}});
    ASSERT_TRUE(lib.ok()) << lib.status().to_string();
    auto& L = **lib;
    EXPECT_TRUE(L.resolve("x.safetensors").ok());
    EXPECT_TRUE(L.resolve("sub/y.safetensors").ok());
    EXPECT_TRUE(L.resolve("alias.safetensors").ok()); // a link that stays inside
    for (const char* bad : {"../outside/z.safetensors", "sub/../x.safetensors", "/etc/passwd",
                            "escape.safetensors", "x.txt", "", "nope.safetensors"}) {
        auto r = L.resolve(bad);
        EXPECT_FALSE(r.ok()) << bad;
    }
    EXPECT_NE(L.resolve("escape.safetensors").status().message().find("outside"), std::string::npos);
    EXPECT_NE(L.resolve("../outside/z.safetensors").status().message().find("'..'"), std::string::npos);
    EXPECT_EQ(L.resolve("nope.safetensors").status().code(), ErrorCode::kNotFound);

    auto x1 = L.get("x.safetensors"), x2 = L.get("x.safetensors");
    ASSERT_TRUE(x1.ok() && x2.ok()) << x1.status().to_string();
    EXPECT_EQ(x1->get(), x2->get()); // read once, shared
    EXPECT_EQ(L.cached_sets(), 1u);
    // A request's combination equals the set built from the adapters directly.
    auto combo = L.request_set({{"x.safetensors", 0.7f}, {"sub/y.safetensors", 0.4f}});
    ASSERT_TRUE(combo.ok()) << combo.status().to_string();
    auto direct = runtime_set(*m, {{adapter_from(write_layout(cfg(), rx, Layout::kPeft)), 0.7f},
                                   {adapter_from(write_layout(cfg(), ry, Layout::kOriginal)), 0.4f}});
    const Latents a = generate(*m, combo->get()), b = generate(*m, direct.get());
    EXPECT_EQ(a.video, b.video);
    EXPECT_EQ(a.audio, b.audio);
    EXPECT_EQ(L.request_set({})->get(), nullptr);
    // A bad file fails the request that names it; the library keeps serving the others.
    {
        std::FILE* f = std::fopen((root / "loras" / "bad.safetensors").c_str(), "wb");
        std::fputs("junk", f);
        std::fclose(f);
    }
    auto bad = L.request_set({{"x.safetensors", 1.0f}, {"bad.safetensors", 1.0f}});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("bad.safetensors"), std::string::npos) << bad.status().to_string();
    EXPECT_TRUE(L.get("x.safetensors").ok());
    // A changed file is read again.
    fs::last_write_time(root / "loras" / "x.safetensors",
                        fs::last_write_time(root / "loras" / "x.safetensors") + std::chrono::seconds(5));
    auto x3 = L.get("x.safetensors");
    ASSERT_TRUE(x3.ok());
    EXPECT_NE(x3->get(), x1->get());
    // Past the budget the least recently used set goes (the one just loaded stays).
    auto small = runtime::AdapterLibrary::open({.dir = (root / "loras").string(),
                                                .config = cfg(),
                                                .ctx = ops::Context::cpu(),
                                                .dtype = m->act_dtype(),
                                                .budget_bytes = 1,
                                                .read = {}});
    ASSERT_TRUE(small.ok());
    ASSERT_TRUE((*small)->get("x.safetensors").ok());
    ASSERT_TRUE((*small)->get("sub/y.safetensors").ok());
    EXPECT_EQ((*small)->cached_sets(), 1u);
    // In-flight users keep a dropped set alive.
    EXPECT_TRUE(x1->get()->factor_count() > 0);
}

// Issue #42: a refused adapter is refused again from the library's verdict (per file identity: device, inode,
// size, mtime) without being parsed, the verdicts are bounded, a file with more tensors than any adapter of
// this DiT is refused without parsing its whole header, and no message shows the server's folder path.
TEST(AdapterLibrary, RefusalsAreCachedBoundedAndNameTheAdapterOnly) {
    const fs::path root = fs::path(H3_BINARY_DIR) / "test_lora_apply" / "refusals";
    fs::remove_all(root);
    fs::create_directories(root / "loras");
    // 60,000 one-byte tensors: past lora_tensor_limit, and 26 s to refuse when the header was parsed whole
    {
        std::string h = "{";
        for (int i = 0; i < 60000; ++i)
            h += (i ? ",\"k" : "\"k") + std::to_string(i) +
                 "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" + std::to_string(i) + "," +
                 std::to_string(i + 1) + "]}";
        h += "}";
        std::FILE* f = std::fopen((root / "loras" / "many.safetensors").c_str(), "wb");
        uint8_t len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i));
        std::fwrite(len, 1, 8, f);
        std::fwrite(h.data(), 1, h.size(), f);
        const std::string data(60000, '\0');
        std::fwrite(data.data(), 1, data.size(), f);
        std::fclose(f);
    }
    for (const char* junk : {"junk1.safetensors", "junk2.safetensors", "junk3.safetensors"}) {
        std::FILE* f = std::fopen((root / "loras" / junk).c_str(), "wb");
        std::fputs("junk", f);
        std::fclose(f);
    }
    EXPECT_LT(model::lora_tensor_limit(cfg()), 60000u);
    auto lib = runtime::AdapterLibrary::open({.dir = (root / "loras").string(),
                                              .config = cfg(),
                                              .ctx = ops::Context::cpu(),
                                              .dtype = DType::kF32,
                                              .max_refusals = 2});
    ASSERT_TRUE(lib.ok()) << lib.status().to_string();
    auto& L = **lib;
    const std::string server_path = fs::canonical(root).string();
    const auto t0 = std::chrono::steady_clock::now();
    auto many = L.get("many.safetensors");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    ASSERT_FALSE(many.ok());
    EXPECT_EQ(many.status().code(), ErrorCode::kBadInput);
    const std::string m = many.status().message();
    EXPECT_NE(m.find("LoRA 'many.safetensors'"), std::string::npos) << m;
    EXPECT_NE(m.find("more than " + std::to_string(model::lora_tensor_limit(cfg())) + " tensors"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find(server_path), std::string::npos) << m;
    EXPECT_EQ(L.files_read(), 1u);
    // named again: the cached verdict, nothing parsed
    auto again = L.get("many.safetensors");
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status().message(), m);
    EXPECT_EQ(L.files_read(), 1u);
    for (const char* junk : {"junk1.safetensors", "junk2.safetensors", "junk1.safetensors"}) {
        auto r = L.get(junk);
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.status().message().find(junk), std::string::npos) << r.status().to_string();
        EXPECT_EQ(r.status().message().find(server_path), std::string::npos) << r.status().to_string();
    }
    EXPECT_EQ(L.files_read(), 3u); // junk1 a second time: cached
    EXPECT_TRUE(L.get("junk3.safetensors").status().code() == ErrorCode::kBadInput);
    EXPECT_EQ(L.files_read(), 4u);
    EXPECT_EQ(L.cached_refusals(), 2u); // bounded: many.safetensors was forgotten
    ASSERT_FALSE(L.get("many.safetensors").ok());
    EXPECT_EQ(L.files_read(), 5u);
    // a refused file that is fixed (a new identity) is read again, and accepted
    const RefFactors rx = reference_factors(cfg(), 71, 0.03f);
    ASSERT_TRUE(io::write_safetensors((root / "loras" / "junk3.safetensors").string(),
                                      write_layout(cfg(), rx, Layout::kPeft))
                    .ok());
    auto fixed = L.get("junk3.safetensors");
    ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
    EXPECT_EQ(L.files_read(), 6u);
    ASSERT_TRUE(L.get("junk3.safetensors").ok());
    EXPECT_EQ(L.files_read(), 6u);
}
