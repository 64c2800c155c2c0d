// Step caches end to end on the DiT golden model A (2 blocks, fp32, CPU): deterministic hit patterns and
// counters, bit-exact output for policies that skip nothing, lifecycle on cancellation mid-denoise, and
// independent state for interleaved requests.
#include "cache/step_cache.h"
#include "core/torch_generator.h"
#include "model/dit/dit_model.h"
#include "model/latent_spec.h"
#include "pipeline/generate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

using namespace h3;
using namespace h3::pipeline;

namespace {

// The 64x32, 107-frame geometry on the latent spec of `m`'s config (the released VAEs, the model's widths).
Geometry geometry_for(const model::DitModel& m) {
    auto spec = model::derive_latent_spec({.dit = &m.config(), .dit_file = "the test DiT"});
    EXPECT_TRUE(spec.ok()) << spec.status().to_string();
    auto g = resolve_geometry({.width = 64, .height = 32, .frames = 107}, *spec);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    return *g;
}

std::unique_ptr<model::DitModel> load_model() {
    auto ck = model::open_dit_checkpoint(std::string(H3_SOURCE_DIR) + "/tests/data/dit/A/diffusers");
    EXPECT_TRUE(ck.ok()) << ck.status().to_string();
    auto m = model::DitModel::load(*ck, {.device = Device::cpu(), .precision = model::DitPrecision::kFp32},
                                   ops::Context::cpu());
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return std::move(m).value();
}

Conditioning random_conditioning(const model::DitConfig& c, int64_t L) {
    Conditioning cond;
    cond.embeddings = Tensor::host(Shape{L, c.text_dim}, DType::kF32);
    TorchGenerator g(7);
    g.randn(cond.embeddings.data_as<float>(), static_cast<size_t>(cond.embeddings.numel()));
    cond.tags.assign(static_cast<size_t>(L), kTagText);
    return cond;
}

struct CacheRun {
    GenerationOutput out;
    std::string hits; // one char per step: C computed, H hit (in-forward), R reused (no DiT call)
};

CacheRun run(const model::DitModel& m, const std::string& spec, int steps = 11, DenoiseOptions o = {}) {
    GenerationRequest rq;
    rq.geometry = geometry_for(m);
    rq.steps = steps;
    rq.seed = 99;
    auto cs = cache::parse_cache_spec(spec);
    EXPECT_TRUE(cs.ok()) << cs.status().to_string();
    rq.cache = *cs;
    auto out = generate_latents(m, random_conditioning(m.config(), 6), rq, o);
    EXPECT_TRUE(out.ok()) << spec << ": " << out.status().to_string();
    CacheRun r;
    if (!out.ok()) return r;
    r.out = std::move(out).value();
    for (const auto& s : r.out.work.steps) r.hits += !s.dit_call ? 'R' : (s.cache_hit ? 'H' : 'C');
    return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && a.dtype() == b.dtype() &&
           std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

} // namespace

TEST(CacheGenerate, PoliciesThatSkipNothingAreBitExact) {
    auto m = load_model();
    CacheRun base = run(*m, "none");
    EXPECT_EQ(base.hits, "CCCCCCCCCC");
    EXPECT_EQ(base.out.work.blocks_executed(), 20);
    EXPECT_EQ(base.out.work.blocks_skipped(), 0);
    EXPECT_GT(base.out.work.useful_flops(), 0);
    for (const char* spec : {"dbcache:Fn=1,rdt=0", "dbcache:Fn=1,warmup=100",
                             "teacache:coeffs=0/1,thresh=100,refresh=1,refresh_policy=repeat",
                             "velocity:max_reuse=0", "dbcache:Fn=1,scm=1111111111,scm_policy=static"}) {
        CacheRun r = run(*m, spec);
        EXPECT_EQ(r.hits, "CCCCCCCCCC") << spec;
        EXPECT_TRUE(same_bits(r.out.video_latents, base.out.video_latents)) << spec;
        EXPECT_TRUE(same_bits(r.out.audio_latents, base.out.audio_latents)) << spec;
    }
    EXPECT_EQ(cache::StepCache::live_count(), 0);
}

TEST(CacheGenerate, HitPatternsAndCounters) {
    auto m = load_model();
    CacheRun base = run(*m, "none");
    // rdt ≥ 1 means "always similar". With mc=1 the library's counter allows two hits after a gap
    // (the continuous counter is not advanced by a non-consecutive hit; caches.md §2.4).
    CacheRun db = run(*m, "dbcache:Fn=1,rdt=1,warmup=2,mc=1");
    EXPECT_EQ(db.hits, "CCHCHHCHHC");
    EXPECT_EQ(db.out.work.cache_hits(), 5);
    EXPECT_EQ(db.out.work.blocks_executed(), 5 * 2 + 5 * 1);
    EXPECT_EQ(db.out.work.blocks_skipped(), 5);
    EXPECT_EQ(db.out.work.steps[2].reason, "similar");
    EXPECT_EQ(db.out.work.steps[3].reason, "max_continuous");
    EXPECT_FALSE(same_bits(db.out.video_latents, base.out.video_latents));
    // Deterministic: the same request gives the same bits.
    CacheRun db2 = run(*m, "dbcache:Fn=1,rdt=1,warmup=2,mc=1");
    EXPECT_TRUE(same_bits(db.out.video_latents, db2.out.video_latents));
    // TaylorSeer: same decisions, different payload.
    CacheRun ts = run(*m, "dbcache:Fn=1,rdt=1,warmup=2,mc=1,taylorseer=1");
    EXPECT_EQ(ts.hits, db.hits);
    EXPECT_FALSE(same_bits(ts.out.video_latents, db.out.video_latents));
    // Static mask: mask-0 steps always cache.
    CacheRun sc = run(*m, "dbcache:Fn=1,scm=1110011001,scm_policy=static");
    EXPECT_EQ(sc.hits, "CCCHHCCHHC");
    // A once-refresh at step 4 forces a compute there and restarts the references.
    CacheRun rf = run(*m, "dbcache:Fn=1,rdt=1,warmup=2,refresh=4");
    EXPECT_EQ(rf.hits, "CCHHCHHHHH");
    EXPECT_TRUE(rf.out.work.steps[4].refreshed);
    // Velocity reuse: 10 forwards, window [2, 8) → reuse at 3, 5, 7; the whole DiT call is skipped.
    CacheRun v = run(*m, "velocity");
    EXPECT_EQ(v.hits, "CCCRCRCRCC");
    EXPECT_EQ(v.out.work.dit_calls(), 7);
    EXPECT_EQ(v.out.work.blocks_skipped(), 6);
    // TeaCache with P(x) = x and threshold 100: everything between the forced first and last steps hits.
    CacheRun t = run(*m, "teacache:coeffs=1/0,thresh=100");
    EXPECT_EQ(t.hits, "CHHHHHHHHC");
    EXPECT_GT(t.out.work.steps[1].probe_elements, 0);
    // TeaCache on a checkpoint without coefficients is refused.
    GenerationRequest rq;
    rq.geometry = geometry_for(*m);
    rq.steps = 5;
    rq.cache = *cache::parse_cache_spec("teacache");
    auto bad = generate_latents(*m, random_conditioning(m->config(), 6), rq);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().to_string().find("no TeaCache coefficient set"), std::string::npos);
    EXPECT_EQ(cache::StepCache::live_count(), 0);
}

TEST(CacheGenerate, CancellationMidDenoiseLeavesNothing) {
    auto m = load_model();
    CacheRun base = run(*m, "dbcache:Fn=1,rdt=1,warmup=2");
    std::atomic<bool> cancel{false};
    int records = 0;
    DenoiseOptions o;
    o.cancel = &cancel;
    // Cancel inside step 4's forward, after block 0 ran (the cache holds its step state then).
    o.hook.wants = [](const std::string& n) { return n == "blocks.0.out"; };
    o.hook.record = [&](const std::string&, const Tensor&) {
        if (++records == 5) {
            EXPECT_EQ(cache::StepCache::live_count(), 1);
            cancel = true;
        }
    };
    GenerationRequest rq;
    rq.geometry = geometry_for(*m);
    rq.steps = 11;
    rq.seed = 99;
    rq.cache = *cache::parse_cache_spec("dbcache:Fn=1,rdt=1,warmup=2");
    auto out = generate_latents(*m, random_conditioning(m->config(), 6), rq, o);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), ErrorCode::kCancelled);
    EXPECT_EQ(cache::StepCache::live_count(), 0);
    CacheRun after = run(*m, "dbcache:Fn=1,rdt=1,warmup=2");
    EXPECT_EQ(after.hits, base.hits);
    EXPECT_TRUE(same_bits(after.out.video_latents, base.out.video_latents));
}

TEST(CacheGenerate, InterleavedRequestsKeepTheirOwnState) {
    auto m = load_model();
    CacheRun a0 = run(*m, "dbcache:Fn=1,rdt=1,warmup=2,mc=1");
    CacheRun b0 = run(*m, "velocity");
    CacheRun c0 = run(*m, "teacache:coeffs=1/0,thresh=100");
    CacheRun a, b, c;
    {
        std::thread ta([&] { a = run(*m, "dbcache:Fn=1,rdt=1,warmup=2,mc=1"); });
        std::thread tb([&] { b = run(*m, "velocity"); });
        std::thread tc([&] { c = run(*m, "teacache:coeffs=1/0,thresh=100"); });
        ta.join();
        tb.join();
        tc.join();
    }
    EXPECT_EQ(a.hits, a0.hits);
    EXPECT_EQ(b.hits, b0.hits);
    EXPECT_EQ(c.hits, c0.hits);
    EXPECT_TRUE(same_bits(a.out.video_latents, a0.out.video_latents));
    EXPECT_TRUE(same_bits(b.out.video_latents, b0.out.video_latents));
    EXPECT_TRUE(same_bits(c.out.audio_latents, c0.out.audio_latents));
    EXPECT_EQ(cache::StepCache::live_count(), 0);
}
