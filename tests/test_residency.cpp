// Weight residency on the CPU: layerwise streaming of DiT blocks and text layers reads exactly the bytes the
// resident model reads (byte-identical latents with and without step-cache jumps, for several K and
// prefetch depths, across consecutive jobs), the ring's bookkeeping, int8 (W8A16) quantization and its
// error against bf16, the on-disk int8 cache, and the fp16 mode (load-time overflow refusal naming the
// tensor, run-time activation overflow failing the job, fp16 generate close to fp32).
#include "cli/device_setup.h"
#include "core/cuda_api.h"
#include "core/host_pin.h"
#include "core/torch_generator.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/dit/dit_model.h"
#include "model/dit/dit_random.h"
#include "model/dit/random_weights.h"
#include "model/latent_spec.h"
#include "model/text/text_model.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/weights/int8_cache.h"
#include "ops/quant.h"
#include "pipeline/generate.h"
#include "pipeline/generator.h"
#include "pipeline/job_builder.h"
#include "pipeline/quality_metrics.h"
#include "runtime/model_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

namespace fs = std::filesystem;
using namespace h3;
using namespace h3::model;

namespace {

constexpr int kBlocks = 6;

// A diffusers transformer folder with `layers` blocks of the tiny width (deterministic random bf16 weights
// with the fp32 islands); `edit` may change tensors before they are written.
std::string write_dit(const std::string& name, int layers,
                      const std::function<void(std::vector<io::NamedTensor>&)>& edit = {}) {
    const fs::path dir = fs::path(H3_BINARY_DIR) / "residency" / name;
    fs::create_directories(dir);
    DitConfig c = tiny_dit_config();
    c.num_layers = layers;
    EXPECT_TRUE(io::write_json_file((dir / "config.json").string(), c.to_diffusers_json()).ok());
    std::vector<io::NamedTensor> tensors;
    for (const auto& spec : dit_tensor_specs(c, DitFormat::kDiffusers))
        tensors.push_back({spec.name, random_dit_tensor(spec, 5)});
    if (edit) edit(tensors);
    EXPECT_TRUE(io::write_safetensors((dir / "diffusion_pytorch_model.safetensors").string(), tensors).ok());
    return dir.string();
}

const std::string& dit_dir() {
    static const std::string d = write_dit("dit6", kBlocks);
    return d;
}

std::unique_ptr<DitModel> load(const std::string& dir, DitPrecision p, ResidencyOptions r = {},
                               const ops::Context& ctx = ops::Context::cpu()) {
    auto ck = open_dit_checkpoint(dir);
    EXPECT_TRUE(ck.ok()) << ck.status().to_string();
    auto m = DitModel::load(*ck, {.device = ctx.device, .precision = p, .residency = r}, ctx);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? std::move(m).value() : nullptr;
}

ResidencyOptions layerwise(int k, int depth = 1, WeightFormat f = WeightFormat::kNative) {
    ResidencyOptions r;
    r.mode = Residency::kLayerwise;
    r.resident_layers = k;
    r.prefetch_depth = depth;
    r.format = f;
    return r;
}

pipeline::Conditioning conditioning(int64_t rows) {
    pipeline::Conditioning cond;
    cond.embeddings = Tensor::host(Shape{rows, tiny_dit_config().text_dim}, DType::kF32);
    TorchGenerator g(7);
    g.randn(cond.embeddings.data_as<float>(), static_cast<size_t>(cond.embeddings.numel()));
    cond.tags.assign(static_cast<size_t>(rows), pipeline::kTagText);
    return cond;
}

struct GenRun {
    pipeline::GenerationOutput out;
    std::string hits;
};

// A short clip (22 frames: 7 latent frames, 88 packed rows) keeps every run well under a second.
pipeline::GenerationRequest request(int steps) {
    pipeline::GenerationRequest rq;
    const DitConfig c = tiny_dit_config();
    auto spec = derive_latent_spec({.dit = &c, .dit_file = "the tiny DiT config"});
    EXPECT_TRUE(spec.ok()) << spec.status().to_string();
    auto g = pipeline::resolve_geometry(
        {.width = 64, .height = 32, .frames = 22, .limits = {.min_seconds = 0.5}}, *spec);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    rq.geometry = *g;
    rq.steps = steps;
    rq.seed = 21;
    return rq;
}

GenRun generate(const DitModel& m, const std::string& cache = "none", int steps = 7) {
    pipeline::GenerationRequest rq = request(steps);
    auto cs = cache::parse_cache_spec(cache);
    EXPECT_TRUE(cs.ok()) << cs.status().to_string();
    rq.cache = *cs;
    auto out = pipeline::generate_latents(m, conditioning(5), rq);
    EXPECT_TRUE(out.ok()) << cache << ": " << out.status().to_string();
    GenRun r;
    if (!out.ok()) return r;
    r.out = std::move(out).value();
    for (const auto& s : r.out.work.steps) r.hits += !s.dit_call ? 'R' : (s.cache_hit ? 'H' : 'C');
    return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
    return a.defined() && b.defined() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
           std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// cosine and rel-RMS of a against the reference b.
std::pair<double, double> compare(const Tensor& a, const Tensor& b) {
    const pipeline::SignalMetrics m =
        pipeline::signal_metrics(b.data_as<const float>(), a.data_as<const float>(), a.numel());
    return {m.cosine, m.rel_rms};
}

// The step caches whose jumps the layerwise source must follow: DBCache hits (Fn → end, and Fn → the
// last Bn blocks), TaylorSeer forecasts, TeaCache skips of the whole stack.
const std::vector<std::string> kCaches = {
    "none", "dbcache:Fn=1,rdt=1,warmup=2,mc=1", "dbcache:Fn=2,Bn=2,rdt=1,warmup=1,mc=2",
    "dbcache:Fn=1,Bn=1,rdt=1,warmup=2,mc=1,taylorseer=1", "teacache:coeffs=1/0,thresh=100"};

} // namespace

TEST(HostPinning, MergesRangesThatSharePages) {
    const size_t page = 4096;
    auto at = [](uintptr_t a) { return reinterpret_cast<const void*>(a); };
    auto m = HostPinning::merged_pages(
        {{at(0x10010), 100}, {at(0x10200), 0x1000}, {at(0x30000), 0x1000}, {at(0x31000), 10}, {at(0x0), 0}},
        page);
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[0].ptr, at(0x10000));
    EXPECT_EQ(m[0].bytes, 0x2000u);   // [0x10010, +100) and [0x10200, 0x11200) share page 0x10000
    EXPECT_EQ(m[1].ptr, at(0x30000)); // adjacent but not sharing a page: kept apart
    EXPECT_EQ(m[1].bytes, 0x1000u);
    EXPECT_EQ(m[2].ptr, at(0x31000));
}

TEST(LayerSource, PrefetchWindowJumpsAndEndOfPass) {
    // 5 layers of two small bf16 matrices with distinct values; the first stays resident.
    std::vector<std::vector<WeightMaster>> layers;
    for (int l = 0; l < 5; ++l) {
        std::vector<WeightMaster> ml;
        for (int i = 0; i < 2; ++i) {
            std::vector<float> v(12);
            for (size_t j = 0; j < v.size(); ++j)
                v[j] = static_cast<float>(l * 100 + i * 20 + static_cast<int>(j));
            ml.push_back({host_tensor_from(v, Shape{4, 3}, DType::kF32), Tensor()});
        }
        layers.push_back(std::move(ml));
    }
    auto expect_layer = [](const std::vector<Tensor>& t, int l) {
        ASSERT_EQ(t.size(), 2u);
        for (int i = 0; i < 2; ++i) EXPECT_EQ(t[i].get({1, 2}), l * 100 + i * 20 + 5) << "layer " << l;
    };
    auto src = LayerWeightSource::create(layers, {.options = layerwise(1), .compute = DType::kF32},
                                         ops::Context::cpu());
    ASSERT_TRUE(src.ok()) << src.status().to_string();
    LayerWeightSource& s = **src;
    EXPECT_EQ(s.slots(), 2);
    auto pass = [&](const std::vector<int>& order) {
        for (int l : order) {
            auto w = s.acquire(l);
            ASSERT_TRUE(w.ok()) << w.status().to_string();
            expect_layer(**w, l);
            EXPECT_EQ(s.slots_in_use(), s.streamed(l) ? 1 : 0);
            ASSERT_TRUE(s.release(l).ok());
        }
        ASSERT_TRUE(s.end_pass().ok());
        EXPECT_EQ(s.slots_in_use(), 0);
    };
    pass({0, 1, 2, 3, 4}); // cold: 1 is loaded on demand, then everything is prefetched (wrap: 1, 2)
    EXPECT_EQ(s.stats().uploads, 6);
    EXPECT_EQ(s.stats().sync_loads, 1);
    EXPECT_EQ(s.stats().dropped_prefetches, 0);
    EXPECT_EQ(s.slot_layers(), (std::vector<int>{1, 2}));
    pass({0, 3, 4}); // a jump from 0 to 3: the prefetched 1 and 2 are released unused, 3 loads on demand
    EXPECT_EQ(s.stats().uploads, 10);
    EXPECT_EQ(s.stats().sync_loads, 2);
    EXPECT_EQ(s.stats().dropped_prefetches, 2);
    pass({}); // a pass that runs no layer (TeaCache skip): the prefetched start stays, nothing moves
    EXPECT_EQ(s.stats().uploads, 10);
    EXPECT_EQ(s.stats().h2d_bytes, 10u * 2 * 12 * 4);
    EXPECT_EQ(s.stats().device_resident_bytes, 2u * 12 * 4);
    EXPECT_EQ(s.stats().device_ring_bytes, 2u * 2 * 12 * 4);
}

TEST(DitResidency, LayerwiseMatchesResidentByteForByte) {
    auto resident = load(dit_dir(), DitPrecision::kBf16);
    ASSERT_TRUE(resident);
    std::vector<GenRun> base;
    for (const std::string& c : kCaches) base.push_back(generate(*resident, c));
    EXPECT_EQ(base[0].hits, "CCCCCC");
    for (size_t i = 1; i < kCaches.size(); ++i)
        EXPECT_NE(base[i].hits.find('H'), std::string::npos) << kCaches[i];
    for (auto [k, depth] : {std::pair{0, 1}, std::pair{2, 1}, std::pair{4, 2}}) {
        auto lw = load(dit_dir(), DitPrecision::kBf16, layerwise(k, depth));
        ASSERT_TRUE(lw);
        ASSERT_NE(lw->block_source(), nullptr);
        EXPECT_EQ(lw->block_source()->slots(), std::min(depth + 1, kBlocks - k));
        for (size_t i = 0; i < kCaches.size(); ++i) {
            GenRun r = generate(*lw, kCaches[i]);
            EXPECT_EQ(r.hits, base[i].hits) << kCaches[i] << " K=" << k;
            EXPECT_TRUE(same_bits(r.out.video_latents, base[i].out.video_latents))
                << kCaches[i] << " K=" << k;
            EXPECT_TRUE(same_bits(r.out.audio_latents, base[i].out.audio_latents))
                << kCaches[i] << " K=" << k;
            EXPECT_EQ(lw->block_source()->slots_in_use(), 0);
        }
        const ResidencyStats& st = lw->block_source()->stats();
        EXPECT_GT(st.uploads, 0);
        if (k == 0) { // every block streams: the DBCache hits' jumps past prefetched blocks show up
            EXPECT_GT(st.sync_loads, 1) << "the cold start and the Fn=2 → tail jumps load on demand";
            EXPECT_GT(st.dropped_prefetches, 0) << "hits release prefetched blocks unused";
        }
        EXPECT_EQ(st.device_resident_bytes, static_cast<uint64_t>(k) *
                                                lw->block_source()->stats().device_ring_bytes /
                                                static_cast<uint64_t>(lw->block_source()->slots()));
    }
}

TEST(DitResidency, ConsecutiveJobsLeakNoSlot) {
    auto lw = load(dit_dir(), DitPrecision::kBf16, layerwise(1));
    ASSERT_TRUE(lw);
    LayerWeightSource& s = *lw->block_source();
    GenRun first = generate(*lw, "dbcache:Fn=1,rdt=1,warmup=2,mc=1");
    const std::vector<int> after_first = s.slot_layers();
    const int64_t uploads_first = s.stats().uploads;
    s.reset_counters();
    GenRun second = generate(*lw, "dbcache:Fn=1,rdt=1,warmup=2,mc=1");
    EXPECT_TRUE(same_bits(first.out.video_latents, second.out.video_latents));
    EXPECT_EQ(s.slots_in_use(), 0);
    // The same state after every job: the next job's first streamed blocks (in whichever slots).
    auto sorted = [](std::vector<int> v) {
        std::sort(v.begin(), v.end());
        return v;
    };
    EXPECT_EQ(sorted(s.slot_layers()), sorted(after_first));
    EXPECT_EQ(sorted(after_first), (std::vector<int>{1, 2}));
    // The second job starts with the first blocks prefetched (the first job loaded them cold) and otherwise
    // moves the same layers; a hit step (block 0 resident, then a jump to the end) uploads nothing.
    EXPECT_GT(first.out.work.cache_hits(), 0);
    EXPECT_EQ(s.stats().uploads, uploads_first - s.slots());
    EXPECT_EQ(s.stats().sync_loads, 0);
}

TEST(Int8, QuantizerRoundTripIsExactOnRepresentableValues) {
    // Rows whose values are k·2^-e with |k| ≤ 127 and one k = ±127: the scale is 2^-e exactly.
    const int64_t n = 4, k = 96;
    Tensor w = Tensor::host(Shape{n, k}, DType::kBF16);
    for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < k; ++j) {
            int q = static_cast<int>((j * 37 + r * 11) % 255) - 127;
            if (j == 5) q = r % 2 ? 127 : -127;
            w.set({r, j}, r == 3 ? 0.0 : std::ldexp(static_cast<double>(q), -static_cast<int>(3 + 2 * r)));
        }
    auto m = quantize_int8(w, false);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->scale.get({0}), std::ldexp(1.0, -3));
    EXPECT_EQ(m->scale.get({3}), 0.0); // a zero row
    for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
        Tensor back = Tensor::host(Shape{n, k}, dt);
        ASSERT_TRUE(ops::dequantize_rows(ops::Context::cpu(), m->data, m->scale, back).ok());
        for (int64_t r = 0; r < n; ++r)
            for (int64_t j = 0; j < k; ++j) ASSERT_EQ(back.get({r, j}), w.get({r, j})) << r << "," << j;
    }
    // Off-grid values land within half a step of the row scale.
    Tensor g = host_tensor_from({0.3f, -1.0f, 0.123f, 0.5f}, Shape{1, 4}, DType::kF32);
    auto q = quantize_int8(g, false);
    ASSERT_TRUE(q.ok());
    Tensor back = Tensor::host(Shape{1, 4}, DType::kF32);
    ASSERT_TRUE(ops::dequantize_rows(ops::Context::cpu(), q->data, q->scale, back).ok());
    for (int j = 0; j < 4; ++j) EXPECT_LE(std::fabs(back.get({0, j}) - g.get({0, j})), 0.5 / 127 + 1e-7);
}

TEST(Int8, GenerateWithinBoundOfBf16AndResidentEqualsLayerwise) {
    auto bf16 = load(dit_dir(), DitPrecision::kBf16);
    ResidencyOptions ri;
    ri.format = WeightFormat::kInt8;
    auto i8_resident = load(dit_dir(), DitPrecision::kBf16, ri);
    auto i8_layerwise = load(dit_dir(), DitPrecision::kBf16, layerwise(2, 1, WeightFormat::kInt8));
    ASSERT_TRUE(bf16 && i8_resident && i8_layerwise);
    // Tiny width: D = inner = 64, F = 128; one block's six matrices hold 3·D·I + I·D + 2F·D + F·D elements.
    const uint64_t elems = 3 * 64 * 64 + 64 * 64 + 2 * 128 * 64 + 128 * 64, rows = 3 * 64 + 64 + 2 * 128 + 64;
    EXPECT_EQ(i8_resident->block_source()->stats().device_staging_bytes, 2 * elems); // one bf16 block
    EXPECT_EQ(i8_resident->block_source()->stats().device_resident_bytes, kBlocks * (elems + 4 * rows));
    GenRun a = generate(*bf16), b = generate(*i8_resident), c = generate(*i8_layerwise);
    EXPECT_TRUE(same_bits(b.out.video_latents, c.out.video_latents));
    EXPECT_TRUE(same_bits(b.out.audio_latents, c.out.audio_latents));
    EXPECT_GT(i8_layerwise->block_source()->stats().dequantized, 0);
    // One forward's velocity at the first step, and the final latents, against bf16.
    auto [vcos, vrel] = compare(b.out.video_latents, a.out.video_latents);
    auto [acos, arel] = compare(b.out.audio_latents, a.out.audio_latents);
    std::printf("int8 vs bf16 (tiny, 6 forwards): video latents cosine %.6f rel-RMS %.4f, audio cosine %.6f "
                "rel-RMS %.4f\n",
                vcos, vrel, acos, arel);
    EXPECT_FALSE(same_bits(b.out.video_latents, a.out.video_latents));
    // One forward's velocity on a synthetic packed input (t = 0.7 video, 0.4 audio).
    SyntheticLayout sl;
    sl.text = 5;
    sl.latent_frames = 7;
    sl.latent_h = 2;
    sl.latent_w = 4;
    sl.audio = 37;
    const DitPackedInputs in = synthetic_inputs(bf16->config(), sl, 0.7f, 0.4f, 3);
    auto va = bf16->forward(in, nullptr), vb = i8_layerwise->forward(in, nullptr);
    ASSERT_TRUE(va.ok() && vb.ok());
    auto [fcos, frel] = compare(vb->sample, va->sample);
    auto [facos, farel] = compare(vb->audio_sample, va->audio_sample);
    std::printf("int8 vs bf16 (tiny, one forward): video velocity cosine %.6f rel-RMS %.4f, audio velocity "
                "cosine %.6f rel-RMS %.4f\n",
                fcos, frel, facos, farel);
    EXPECT_GT(fcos, 0.999);
    EXPECT_LT(frel, 0.05);
    EXPECT_GT(facos, 0.999);
    EXPECT_LT(farel, 0.05);
    // Measured 0.99999 / 0.004 on this model: the bound leaves a factor 5 on the error.
    EXPECT_GT(vcos, 0.9995);
    EXPECT_LT(vrel, 0.02);
    EXPECT_GT(acos, 0.9995);
    EXPECT_LT(arel, 0.02);
}

TEST(Int8, DiskCacheIsWrittenOnceAndReadBack) {
    const std::string cache = (fs::path(H3_BINARY_DIR) / "residency" / "int8_cache").string();
    fs::remove_all(cache);
    ResidencyOptions r = layerwise(0, 1, WeightFormat::kInt8);
    r.int8_cache_dir = cache;
    auto first = load(dit_dir(), DitPrecision::kBf16, r);
    ASSERT_TRUE(first);
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(cache)) files += e.path().extension() == ".safetensors";
    EXPECT_EQ(files, 1u);
    // Masters stream from the cache file's mapping (shared page cache), not from private copies.
    EXPECT_EQ(first->block_source()->stats().host_mapped_bytes,
              first->block_source()->stats().host_master_bytes);
    auto second = load(dit_dir(), DitPrecision::kBf16, r);
    ASSERT_TRUE(second);
    EXPECT_TRUE(same_bits(generate(*first).out.video_latents, generate(*second).out.video_latents));
}

TEST(DitResidency, LayerwiseMastersAreMappedCheckpointViews) {
    auto lw = load(dit_dir(), DitPrecision::kBf16, layerwise(0));
    ASSERT_TRUE(lw);
    const ResidencyStats& st = lw->block_source()->stats();
    EXPECT_GT(st.host_master_bytes, 0u);
    EXPECT_EQ(st.host_mapped_bytes, st.host_master_bytes); // bf16 checkpoint, bf16 compute: no copy
    EXPECT_EQ(st.host_pinned_bytes, 0u);                   // nothing to pin on the CPU
}

TEST(Fp16, LoadRefusesAWeightBeyondFp16NamingIt) {
    const std::string dir = write_dit("fp16_overflow", 2, [](std::vector<io::NamedTensor>& t) {
        for (auto& nt : t)
            if (nt.name == "transformer_blocks.1.attn.to_k.weight") nt.tensor.set({3, 5}, 70000.0);
    });
    auto ck = open_dit_checkpoint(dir);
    ASSERT_TRUE(ck.ok());
    auto m =
        DitModel::load(*ck, {.device = Device::cpu(), .precision = DitPrecision::kFp16}, ops::Context::cpu());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("transformer_blocks.1.attn.to_k.weight"), std::string::npos)
        << m.status().message();
    EXPECT_NE(m.status().message().find("65504"), std::string::npos) << m.status().message();
    // bf16 holds it.
    EXPECT_TRUE(
        DitModel::load(*ck, {.device = Device::cpu(), .precision = DitPrecision::kBf16}, ops::Context::cpu())
            .ok());
}

TEST(Fp16, GenerateRunsCloseToFp32) {
    auto f32 = load(dit_dir(), DitPrecision::kFp32);
    auto f16 = load(dit_dir(), DitPrecision::kFp16);
    auto f16_lw = load(dit_dir(), DitPrecision::kFp16, layerwise(3));
    ASSERT_TRUE(f32 && f16 && f16_lw);
    EXPECT_EQ(f16->act_dtype(), DType::kF16);
    EXPECT_EQ(f16->residual_dtype(), DType::kF32);
    GenRun a = generate(*f32), b = generate(*f16), c = generate(*f16_lw, "dbcache:Fn=1,rdt=1,warmup=2,mc=1");
    GenRun b2 = generate(*f16, "dbcache:Fn=1,rdt=1,warmup=2,mc=1");
    EXPECT_TRUE(same_bits(b2.out.video_latents, c.out.video_latents));
    auto [cosv, relv] = compare(b.out.video_latents, a.out.video_latents);
    std::printf("fp16 vs fp32 (tiny, 6 forwards): video latents cosine %.7f rel-RMS %.5f\n", cosv, relv);
    EXPECT_GT(cosv, 0.9999);
    EXPECT_LT(relv, 0.01);
}

TEST(Fp16, ActivationOverflowFailsTheJobNamingTheBlock) {
    // In range for fp16 (60000 < 65504) but the FFN output of block 1 overflows: the fp32 residual stream
    // catches the inf, the job fails with the block's index; bf16 runs the same model.
    const std::string dir = write_dit("fp16_activation", 3, [](std::vector<io::NamedTensor>& t) {
        for (auto& nt : t)
            if (nt.name == "transformer_blocks.1.ff.net.2.weight")
                for (int64_t i = 0; i < nt.tensor.numel(); ++i)
                    store_from_f64(nt.tensor.data(), nt.tensor.dtype(), static_cast<size_t>(i),
                                   i % 2 ? 60000.0 : 59000.0);
    });
    auto ck = open_dit_checkpoint(dir);
    ASSERT_TRUE(ck.ok());
    auto m =
        DitModel::load(*ck, {.device = Device::cpu(), .precision = DitPrecision::kFp16}, ops::Context::cpu());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const pipeline::GenerationRequest rq = request(3);
    auto out = pipeline::generate_latents(**m, conditioning(5), rq);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("fp16 activation overflow"), std::string::npos)
        << out.status().message();
    EXPECT_NE(out.status().message().find("after block 1"), std::string::npos) << out.status().message();
    auto bf =
        DitModel::load(*ck, {.device = Device::cpu(), .precision = DitPrecision::kBf16}, ops::Context::cpu());
    ASSERT_TRUE(bf.ok());
    EXPECT_TRUE(pipeline::generate_latents(**bf, conditioning(5), rq).ok());
}

TEST(TextResidency, LayerwiseMatchesResidentAndInt8IsClose) {
    const std::string root = (fs::path(H3_BINARY_DIR) / "residency" / "tiny").string();
    if (!fs::exists(fs::path(root) / "model_index.json")) {
        ASSERT_TRUE(write_tiny_checkpoint({.dir = root, .seed = 3}).ok());
    }
    auto ck = open_text_checkpoint(root);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    const std::vector<int32_t> ids = {5, 17, 2, 99, 41, 7, 63, 12};
    auto run = [&](ResidencyOptions r, DitPrecision p) {
        auto m = TextModel::load(*ck, {.device = Device::cpu(), .precision = p, .residency = r},
                                 ops::Context::cpu());
        EXPECT_TRUE(m.ok()) << m.status().to_string();
        Tensor out;
        if (!m.ok()) return out;
        for (int pass = 0; pass < 2; ++pass) { // twice: the second pass starts from the prefetched ring
            auto h = (*m)->forward(ids);
            EXPECT_TRUE(h.ok()) << h.status().to_string();
            if (!h.ok()) return out;
            if (pass == 1) {
                EXPECT_TRUE(same_bits(*h, out));
            }
            out = *h;
        }
        if (!r.plain()) {
            EXPECT_EQ((*m)->layer_source()->slots_in_use(), 0);
        }
        return out;
    };
    const Tensor resident = run({}, DitPrecision::kBf16);
    EXPECT_TRUE(same_bits(run(layerwise(0), DitPrecision::kBf16), resident));
    EXPECT_TRUE(same_bits(run(layerwise(1, 2), DitPrecision::kBf16), resident));
    Tensor i8 = run(layerwise(1, 1, WeightFormat::kInt8), DitPrecision::kBf16);
    auto a = to_f32_vector(i8), b = to_f32_vector(resident);
    ASSERT_TRUE(a.ok() && b.ok());
    Tensor ta = host_tensor_from(*a, i8.shape()), tb = host_tensor_from(*b, resident.shape());
    auto [cs, rel] = compare(ta, tb);
    std::printf("text int8 vs bf16 (tiny, 3 layers): cosine %.6f rel-RMS %.4f\n", cs, rel);
    EXPECT_GT(cs, 0.999);
    const Tensor f16 = run({}, DitPrecision::kFp16);
    EXPECT_EQ(f16.dtype(), DType::kF32); // the fp32 residual stream is the output
    EXPECT_TRUE(same_bits(run(layerwise(1), DitPrecision::kFp16), f16));
}

// ---- through the seam: ModelStore follows the PlacementPlan's weights
// ---------------------------------------

TEST(ResidencySeam, StoreLoadsThePlannedWeightsAndTheJobMatchesResident) {
    using runtime::Component;
    const std::string root = (fs::path(H3_BINARY_DIR) / "residency" / "tiny").string();
    if (!fs::exists(fs::path(root) / "model_index.json")) {
        ASSERT_TRUE(write_tiny_checkpoint({.dir = root, .seed = 3}).ok());
    }
    auto run = [&](const runtime::PlacementPlan& plan, std::string* dit_weights) -> Tensor {
        auto store = runtime::ModelStore::open(root, plan);
        EXPECT_TRUE(store.ok()) << store.status().to_string();
        if (!store.ok()) return {};
        auto generator = pipeline::Generator::create(**store);
        EXPECT_TRUE(generator.ok());
        pipeline::JobInput in;
        in.prompt = "a red fox";
        in.size = "64x32";
        in.frames = 107;
        in.num_inference_steps = 4;
        in.seed = 7;
        in.outputs.media.wav = (fs::path(H3_BINARY_DIR) / "residency" / "seam.wav").string();
        auto job = pipeline::JobBuilder((*store)->info()).build(std::move(in));
        EXPECT_TRUE(job.ok()) << job.status().to_string();
        if (!job.ok()) return {};
        // per job: the DiT has left when the decoders load
        bool dit_at_decode = false;
        pipeline::JobEvents ev;
        ev.progress = [&](const pipeline::JobProgress& p) {
            if (p.stage == pipeline::Stage::kDecode)
                dit_at_decode |= (*store)->loaded(Component::kTransformer);
        };
        auto r = (*generator)->run(*job, ev);
        EXPECT_TRUE(r.ok()) << r.status().to_string();
        if (!r.ok()) return {};
        EXPECT_FALSE(dit_at_decode);
        EXPECT_EQ(r->placement, plan.describe());
        EXPECT_EQ(r->metrics(job->task).value("placement", ""), plan.describe());
        *dit_weights = r->dit_weights;
        return r->video_latents;
    };
    const runtime::PlacementPlan resident = runtime::PlacementPlan::per_job(Device::cpu());
    std::string w0, w1;
    const Tensor base = run(resident, &w0);
    ASSERT_TRUE(base.defined());
    EXPECT_EQ(w0, ""); // plain resident blocks: no weight source
    runtime::PlacementPlan streamed = resident;
    for (Component c : {Component::kTransformer, Component::kTextEncoder}) streamed[c].weights = layerwise(1);
    EXPECT_NE(streamed.describe().find("transformer per_job cpu weights layerwise"), std::string::npos)
        << streamed.describe();
    const Tensor lw = run(streamed, &w1);
    EXPECT_NE(w1.find("layerwise"), std::string::npos) << w1;
    EXPECT_TRUE(same_bits(lw, base)); // the text stack and the DiT streamed: the same latents
}

TEST(ResidencySeam, ReplanOnlyWhileNothingIsLoaded) {
    using runtime::Component;
    const std::string root = (fs::path(H3_BINARY_DIR) / "residency" / "tiny").string();
    if (!fs::exists(fs::path(root) / "model_index.json")) {
        ASSERT_TRUE(write_tiny_checkpoint({.dir = root, .seed = 3}).ok());
    }
    runtime::PlacementPlan plan = runtime::PlacementPlan::per_job(Device::cpu());
    auto store = runtime::ModelStore::open(root, plan);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    plan[Component::kTransformer].weights = layerwise(0);
    ASSERT_TRUE((*store)->replan(plan).ok());
    {
        auto dit = (*store)->dit(Component::kTransformer);
        ASSERT_TRUE(dit.ok()) << dit.status().to_string();
        ASSERT_NE((*dit)->block_source(), nullptr);
        EXPECT_EQ((*dit)->block_source()->options().mode, Residency::kLayerwise);
        Status st = (*store)->replan(runtime::PlacementPlan::per_job(Device::cpu()));
        EXPECT_FALSE(st.ok());
        EXPECT_NE(st.message().find("transformer is loaded"), std::string::npos) << st.message();
    }
    // a serving plan preloads what it keeps resident
    ASSERT_TRUE((*store)
                    ->replan(runtime::PlacementPlan::serving(
                        Device::cpu(), runtime::ComputePrecision::kDefault, runtime::Residency::kPerJob))
                    .ok());
    EXPECT_TRUE((*store)->loaded(Component::kTransformer));
    EXPECT_EQ((*store)->plan()[Component::kTransformer].weights.mode, Residency::kResident);
}

// ---- CUDA (the device check runs these; skipped without a device) -----------------------------------------

TEST(ResidencyCuda, LayerwiseMatchesResidentPinnedAndPageable) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = h3::cli::DeviceSession::open("cuda:0");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto resident = load(dit_dir(), DitPrecision::kBf16, {}, ctx);
    ASSERT_TRUE(resident);
    for (bool pin : {true, false}) {
        ResidencyOptions r = layerwise(2);
        r.pin_host = pin;
        auto lw = load(dit_dir(), DitPrecision::kBf16, r, ctx);
        ASSERT_TRUE(lw);
        const ResidencyStats& st = lw->block_source()->stats();
        EXPECT_EQ(st.host_pinned_bytes > 0, pin);
        for (const std::string& c : kCaches) {
            GenRun a = generate(*resident, c), b = generate(*lw, c);
            EXPECT_EQ(a.hits, b.hits) << c;
            EXPECT_TRUE(same_bits(a.out.video_latents, b.out.video_latents)) << c << " pinned " << pin;
            EXPECT_TRUE(same_bits(a.out.audio_latents, b.out.audio_latents)) << c << " pinned " << pin;
        }
        EXPECT_EQ(lw->block_source()->slots_in_use(), 0);
        std::printf("cuda layerwise K=2 (%s): %s\n", pin ? "pinned" : "pageable", st.summary().c_str());
    }
}

TEST(ResidencyCuda, Int8AndFp16) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = h3::cli::DeviceSession::open("cuda:0");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    ResidencyOptions ri;
    ri.format = WeightFormat::kInt8;
    auto bf16 = load(dit_dir(), DitPrecision::kBf16, {}, ctx);
    auto i8 = load(dit_dir(), DitPrecision::kBf16, ri, ctx);
    auto i8_lw = load(dit_dir(), DitPrecision::kBf16, layerwise(1, 2, WeightFormat::kInt8), ctx);
    auto f32 = load(dit_dir(), DitPrecision::kFp32, {}, ctx);
    auto f16 = load(dit_dir(), DitPrecision::kFp16, {}, ctx);
    auto f16_lw = load(dit_dir(), DitPrecision::kFp16, layerwise(3), ctx);
    ASSERT_TRUE(bf16 && i8 && i8_lw && f32 && f16 && f16_lw);
    GenRun a = generate(*bf16), b = generate(*i8), c = generate(*i8_lw);
    EXPECT_TRUE(same_bits(b.out.video_latents, c.out.video_latents));
    auto [cs, rel] = compare(b.out.video_latents, a.out.video_latents);
    std::printf("cuda int8 vs bf16 (tiny): cosine %.6f rel-RMS %.4f\n", cs, rel);
    EXPECT_GT(cs, 0.999);
    GenRun x = generate(*f32), y = generate(*f16), z = generate(*f16_lw);
    EXPECT_TRUE(same_bits(y.out.video_latents, z.out.video_latents));
    auto [cs16, rel16] = compare(y.out.video_latents, x.out.video_latents);
    std::printf("cuda fp16 vs fp32 (tiny): cosine %.7f rel-RMS %.5f\n", cs16, rel16);
    EXPECT_GT(cs16, 0.9999);
    // The CPU int8 model dequantizes the same bytes: the weights agree, the GEMMs round differently.
    auto cpu_i8 = load(dit_dir(), DitPrecision::kBf16, ri);
    auto [cc, crel] = compare(generate(*cpu_i8).out.video_latents, b.out.video_latents);
    std::printf("cuda int8 vs cpu int8 (tiny): cosine %.7f rel-RMS %.5f\n", cc, crel);
    EXPECT_GT(cc, 0.9999);
}
