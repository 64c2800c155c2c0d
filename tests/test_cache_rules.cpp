// Step cache decision rules against hand-computed sequences (caches.md §1.2, §2.4, §2.7, §2.8, §9.3) and
// the spec parser.
#include "cache/cache_spec.h"
#include "cache/rules.h"
#include "cache/taylorseer.h"
#include "cache/work.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace h3;
using namespace h3::cache;

namespace {

std::string mask_string(const std::vector<int>& m) {
    std::string s;
    for (int v : m) s += static_cast<char>('0' + v);
    return s;
}

std::string mask(const std::string& policy, int n) {
    auto m = steps_mask(policy, n);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? mask_string(*m) : "";
}

} // namespace

// The table generated from cache-dit v1.5.0 (caches.md §2.8).
TEST(CacheScm, MatchesLibraryMasks) {
    for (const char* p : {"slow", "medium", "fast", "ultra"}) {
        EXPECT_EQ(mask(p, 4), "1101");
        EXPECT_EQ(mask(p, 6), "111001");
    }
    EXPECT_EQ(mask("slow", 8), "11111011");
    EXPECT_EQ(mask("medium", 8), "11110101");
    EXPECT_EQ(mask("fast", 8), "11101001");
    EXPECT_EQ(mask("ultra", 8), "11001001");
    EXPECT_EQ(mask("slow", 20), "11111111011100111001");
    EXPECT_EQ(mask("medium", 20), "11111101100011000101");
    EXPECT_EQ(mask("fast", 20), "11111101000000000001");
    EXPECT_EQ(mask("ultra", 20), "11110000000000000001");
    EXPECT_EQ(mask("slow", 28), "1111111101110011100110010001");
    EXPECT_EQ(mask("medium", 28), "1111110110001100011000110001");
    EXPECT_EQ(mask("fast", 28), "1111110100010000100000100001");
    EXPECT_EQ(mask("ultra", 28), "1111001000001000000100000001");
    EXPECT_EQ(mask("slow", 30), "111111111111011100111001100101");
    EXPECT_EQ(mask("medium", 30), "111111111011000110001100011001");
    EXPECT_EQ(mask("fast", 30), "111111111010001000010000010001");
    EXPECT_EQ(mask("ultra", 30), "111111001000001000000100000001");
    EXPECT_EQ(mask("slow", 50), "11111111111111111111110011111000111110001110001101");
    EXPECT_EQ(mask("medium", 50), "11111111111111110011100000111000001110000011100001");
    EXPECT_EQ(mask("fast", 50), "11111111111001100000110000000110000000001100000001");
    EXPECT_EQ(mask("ultra", 50), "11111110001100000000011000000000001100000000000001");
    auto count = [](const std::string& s) { return std::count(s.begin(), s.end(), '1'); };
    EXPECT_EQ(count(mask("slow", 40)), 27);
    EXPECT_EQ(count(mask("medium", 40)), 22);
    EXPECT_EQ(count(mask("fast", 40)), 18);
    EXPECT_EQ(count(mask("ultra", 40)), 12);
    for (int n = 8; n <= 100; ++n)
        for (const char* p : {"slow", "medium", "fast", "ultra"}) {
            std::string m = mask(p, n);
            ASSERT_EQ(m.size(), static_cast<size_t>(n)) << p << " " << n;
            EXPECT_EQ(m.back(), '1');
        }
    EXPECT_FALSE(steps_mask("fast", 5).ok());
    EXPECT_FALSE(steps_mask("quick", 20).ok());
    EXPECT_EQ(mask_string(expand_bins({2, 1}, {3}, 8)), "11000100");
}

TEST(CacheTeaCache, AccumulatesPolynomialAgainstThreshold) {
    // P(x) = 2x − 0.1 (highest power first); thresh 0.5.
    TeaCacheRule r({2.0, -0.1}, 0.5, 6);
    EXPECT_DOUBLE_EQ(TeaCacheRule::polynomial({1, 2, 3}, 2.0), 11.0);
    EXPECT_TRUE(r.should_compute(0, std::nullopt)); // first step forced
    EXPECT_FALSE(r.should_compute(1, 0.1));         // acc = 0.1
    EXPECT_NEAR(r.accumulated(), 0.1, 1e-12);
    EXPECT_FALSE(r.should_compute(2, 0.2)); // acc = 0.4
    EXPECT_TRUE(r.should_compute(3, 0.1));  // acc = 0.5 ≥ 0.5 → compute, acc = 0
    EXPECT_EQ(r.accumulated(), 0.0);
    EXPECT_FALSE(r.should_compute(4, 0.0)); // |P(0)| = 0.1 counts (vLLM-Omni abs)
    EXPECT_NEAR(r.accumulated(), 0.1, 1e-12);
    EXPECT_TRUE(r.should_compute(5, 0.0)); // last step forced
    // The H3 FL2VA set: P(0.01) ≈ 0.1837 ≥ 0.17 → every step computes at relL1 0.01.
    TeaCacheRule h3(kH3Fl2vaTeaCacheCoefficients, kH3Fl2vaTeaCacheThreshold, 10);
    EXPECT_NEAR(TeaCacheRule::polynomial(kH3Fl2vaTeaCacheCoefficients, 0.01), 0.183704, 1e-5);
    EXPECT_TRUE(h3.should_compute(0, std::nullopt));
    EXPECT_TRUE(h3.should_compute(1, 0.01));
}

TEST(CacheDbCache, CheckOrderAndCounters) {
    DbCacheConfig c;
    c.fn_compute_blocks = 1;
    c.residual_diff_threshold = 0.1;
    c.max_warmup_steps = 2;
    c.max_continuous_cached_steps = 2;
    DbCacheRule r(c, {});
    int diff_calls = 0;
    auto small = [&]() -> std::optional<double> {
        ++diff_calls;
        return 0.01;
    };
    EXPECT_FALSE(r.can_cache(0, small));
    EXPECT_EQ(r.reason(), "warmup");
    EXPECT_FALSE(r.can_cache(1, small));
    EXPECT_EQ(r.reason(), "warmup");
    EXPECT_EQ(diff_calls, 0); // the diff is not computed before the cheaper tests pass
    EXPECT_TRUE(r.can_cache(2, small));
    EXPECT_EQ(r.continuous(), 1);
    EXPECT_TRUE(r.can_cache(3, small)); // first run step counted retroactively: 1 → ... +1 = 2
    EXPECT_EQ(r.continuous(), 2);
    EXPECT_FALSE(r.can_cache(4, small)); // cap fires, counter reset
    EXPECT_EQ(r.reason(), "max_continuous");
    EXPECT_EQ(r.continuous(), 0);
    EXPECT_TRUE(r.can_cache(5, small)); // gap: continuous += 0 (not reset) ... counter stays 0
    EXPECT_EQ(r.continuous(), 0);
    EXPECT_TRUE(r.can_cache(6, small)); // consecutive with continuous 0 → +2
    EXPECT_EQ(r.continuous(), 2);
    EXPECT_FALSE(r.can_cache(7, [] { return std::optional<double>(); }));
    EXPECT_EQ(r.reason(), "max_continuous");
    EXPECT_FALSE(r.can_cache(8, [] { return std::optional<double>(0.5); }));
    EXPECT_EQ(r.reason(), "different");
    EXPECT_FALSE(r.can_cache(9, [] { return std::optional<double>(); }));
    EXPECT_EQ(r.reason(), "no_reference");
    EXPECT_EQ(r.cached_count(), 4);
}

TEST(CacheDbCache, MaxCachedThresholdAndAccumulated) {
    DbCacheConfig c;
    c.max_warmup_steps = 0;
    c.max_cached_steps = 1;
    DbCacheRule r(c, {});
    auto d = [] { return std::optional<double>(0.01); };
    EXPECT_TRUE(r.can_cache(0, d));
    EXPECT_FALSE(r.can_cache(1, d));
    EXPECT_EQ(r.reason(), "max_cached");
    DbCacheConfig off;
    off.max_warmup_steps = 0;
    off.residual_diff_threshold = 0;
    DbCacheRule r0(off, {});
    EXPECT_FALSE(r0.can_cache(3, d));
    EXPECT_EQ(r0.reason(), "threshold_off");
    DbCacheConfig acc;
    acc.max_warmup_steps = 0;
    acc.residual_diff_threshold = 0.5;
    acc.max_accumulated_residual_diff_threshold = 0.25;
    DbCacheRule ra(acc, {});
    auto d2 = [] { return std::optional<double>(0.2); };
    EXPECT_TRUE(ra.can_cache(0, d2));  // acc 0.2
    EXPECT_TRUE(ra.can_cache(2, d2));  // acc 0.4
    EXPECT_FALSE(ra.can_cache(4, d2)); // 0.4 ≥ 0.25
    EXPECT_EQ(ra.reason(), "max_accumulated");
    // warmup_interval 2 over 4 warmup steps: steps 0 and 2 never cache, 1 and 3 may.
    DbCacheConfig wi;
    wi.max_warmup_steps = 4;
    wi.warmup_interval = 2;
    DbCacheRule rw(wi, {});
    EXPECT_FALSE(rw.can_cache(0, d));
    EXPECT_TRUE(rw.can_cache(1, d));
    EXPECT_FALSE(rw.can_cache(2, d));
    EXPECT_EQ(rw.reason(), "warmup");
}

TEST(CacheDbCache, StepMaskDynamicAndStatic) {
    DbCacheConfig c;
    c.max_warmup_steps = 8; // the mask's leading run (3) caps the warmup
    c.residual_diff_threshold = 0.1;
    std::vector<int> m = {1, 1, 1, 0, 0, 1, 0, 1};
    DbCacheRule dyn(c, m);
    auto big = [] { return std::optional<double>(0.9); };
    EXPECT_FALSE(dyn.can_cache(2, big));
    EXPECT_EQ(dyn.reason(), "warmup");
    EXPECT_FALSE(dyn.can_cache(3, big)); // mask allows, the threshold test refuses
    EXPECT_EQ(dyn.reason(), "different");
    EXPECT_FALSE(dyn.can_cache(5, big));
    EXPECT_EQ(dyn.reason(), "scm_compute");
    c.scm_policy = ScmPolicy::kStatic;
    DbCacheRule st(c, m);
    EXPECT_TRUE(st.can_cache(3, big));
    EXPECT_EQ(st.reason(), "scm_static");
    EXPECT_TRUE(st.can_cache(4, big));
    EXPECT_TRUE(st.can_cache(9, big)); // beyond the mask counts as 0
}

namespace taylor {
const ops::Context kCpu = ops::Context::cpu();
Tensor scalar(float y) {
    return host_tensor_from(std::vector<float>{y, 2 * y}, Shape{2}, DType::kBF16); // any float dtype in
}
void update(TaylorSeer& t, float y) {
    Status s = t.update(kCpu, scalar(y));
    ASSERT_TRUE(s.ok()) << s.to_string();
}
float approximate(const TaylorSeer& t) {
    Tensor out;
    Status s = t.approximate(kCpu, out);
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) return NAN;
    EXPECT_EQ(out.dtype(), DType::kF32);
    EXPECT_EQ(out.data_as<float>()[1], 2 * out.data_as<float>()[0]); // elementwise, every element
    return out.data_as<float>()[0];
}
} // namespace taylor

TEST(CacheTaylorSeer, LinearAndQuadraticExtrapolation) {
    using taylor::approximate;
    using taylor::update;
    TaylorSeer t1(1);
    Tensor out;
    EXPECT_FALSE(t1.approximate(taylor::kCpu, out).ok()); // nothing to extrapolate from yet
    // steps 0, 1, 2 computed with Y = 1, 3, 5: the derivative appears at step 2 only (current_step > 1).
    for (float y : {1.0f, 3.0f, 5.0f}) {
        t1.mark_step_begin();
        update(t1, y);
    }
    EXPECT_EQ(t1.derivatives_available(), 2);
    t1.mark_step_begin(); // step 3 cached: 5 + 2·1
    EXPECT_FLOAT_EQ(approximate(t1), 7.0f);
    t1.mark_step_begin(); // step 4 cached: 5 + 2·2
    EXPECT_FLOAT_EQ(approximate(t1), 9.0f);
    update(t1, 9.0f); // step 4 computed after a gap of 2: dY = (9 − 5)/2
    t1.mark_step_begin();
    EXPECT_FLOAT_EQ(approximate(t1), 11.0f);
    EXPECT_EQ(t1.bytes(), 4u * 2 * sizeof(float)); // two slots of two sets, reused across steps
    TaylorSeer t0(1);
    t0.mark_step_begin();
    update(t0, 4.0f);
    t0.mark_step_begin();
    update(t0, 6.0f); // step 1: no derivative yet
    EXPECT_EQ(t0.derivatives_available(), 1);
    t0.mark_step_begin();
    EXPECT_FLOAT_EQ(approximate(t0), 6.0f);
    TaylorSeer t2(2); // Y = s² at steps 0..3 → Y' = 5, Y'' = 2 at step 3
    for (float y : {0.0f, 1.0f, 4.0f, 9.0f}) {
        t2.mark_step_begin();
        update(t2, y);
    }
    EXPECT_EQ(t2.derivatives_available(), 3);
    t2.mark_step_begin(); // 9 + 5 + 2/2
    EXPECT_FLOAT_EQ(approximate(t2), 15.0f);
    t2.reset();
    EXPECT_FALSE(t2.ready());
}

TEST(CacheVelocity, WindowPatterns) {
    auto reuse_steps = [](VelocityConfig c, int n) {
        VelocityRule r(c, n);
        std::vector<int> out;
        bool have = false;
        for (int i = 0; i < n; ++i) {
            if (r.should_reuse(i, have, std::nullopt))
                out.push_back(i);
            else {
                r.computed();
                have = true;
            }
        }
        return out;
    };
    VelocityConfig c;
    EXPECT_EQ(reuse_steps(c, 20), (std::vector<int>{5, 7, 9, 11, 13, 15})); // 14 calls
    EXPECT_EQ(reuse_steps(c, 30).size(), 9u);
    EXPECT_EQ(reuse_steps(c, 50).size(), 15u);
    VelocityRule r(c, 20);
    EXPECT_EQ(r.window_start(), 4);
    EXPECT_EQ(r.window_end(), 16);
    VelocityConfig c3 = c;
    c3.refresh_interval = 3;
    c3.max_consecutive_reuse = 2;
    EXPECT_EQ(reuse_steps(c3, 10), (std::vector<int>{3, 4, 6, 7}));
    VelocityConfig th = c;
    th.threshold = 0.1;
    VelocityRule rt(th, 20);
    EXPECT_FALSE(rt.should_reuse(5, true, 0.2));
    EXPECT_TRUE(rt.should_reuse(5, true, 0.05));
    EXPECT_FALSE(rt.should_reuse(5, true, std::nullopt));
}

TEST(CacheSpec, ParsesAndRejects) {
    auto s = parse_cache_spec("dbcache:Fn=1,Bn=0,rdt=0.04,warmup=4,mc=1,taylorseer=1,scm=fast");
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->kind, CacheKind::kDbCache);
    EXPECT_EQ(s->dbcache.fn_compute_blocks, 1);
    EXPECT_EQ(s->dbcache.max_continuous_cached_steps, 1);
    EXPECT_EQ(s->dbcache.taylorseer_order, 1);
    EXPECT_EQ(s->dbcache.scm_preset, "fast");
    EXPECT_EQ(s->describe(), "DBCache_F1B0_W4I1M-1MC1_R0.04_SCMfast_dynamic_T1O1");
    auto d = parse_cache_spec("dbcache");
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->describe(), "DBCache_F8B0_W8I1M-1MC-1_R0.08"); // the library defaults
    auto high = quality_preset("high");
    ASSERT_TRUE(high.ok());
    EXPECT_EQ(high->describe(), "DBCache_F1B0_W4I1M-1MC1_R0.04");
    EXPECT_EQ(quality_preset("lossless")->kind, CacheKind::kNone);
    auto t = parse_cache_spec("teacache:thresh=0.2,coeffs=1/-2/0.5");
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->teacache.coefficients, (std::vector<double>{1, -2, 0.5}));
    EXPECT_EQ(parse_cache_spec("teacache")->teacache.rel_l1_thresh, 0.17);
    auto v = parse_cache_spec("velocity:threshold=0.1,refresh=3,refresh_policy=repeat");
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->refresh.fires(6));
    EXPECT_FALSE(v->refresh.fires(7));
    EXPECT_FALSE(v->refresh.fires(0));
    auto j =
        parse_cache_json(nlohmann::json::parse(R"({"dbcache": {"Fn": 1, "rdt": 0.04, "scm": [1,1,0,1]}})"));
    ASSERT_TRUE(j.ok()) << j.status().to_string();
    EXPECT_EQ(j->dbcache.scm_mask, (std::vector<int>{1, 1, 0, 1}));
    auto fails = [](const std::string& text, const std::string& needle) {
        auto r = parse_cache_spec(text);
        ASSERT_FALSE(r.ok()) << text;
        EXPECT_NE(r.status().to_string().find(needle), std::string::npos) << r.status().to_string();
    };
    fails("dbcache:Fn=1+teacache", "one cache");
    fails("dbcache:foo=1", "unknown field 'foo'");
    fails("dbcache:Fn=0", "out of range");
    fails("dbcache:taylorseer=3", "taylorseer");
    fails("dbcache:rdt=abc", "must be a number");
    fails("dbcache:Fn=1.5", "integer");
    fails("dbcache:Fn=1,Fn=2", "twice");
    fails("dbcache:scm=12", "scm");
    fails("teacache:thresh=-1", "out of range");
    fails("velocity:start=0.8,end=0.2", "must exceed");
    fails("magcache", "unknown cache");
    fails("none:refresh=2", "refresh");
    auto two = parse_cache_json(nlohmann::json::parse(R"({"dbcache": {}, "teacache": {}})"));
    EXPECT_FALSE(two.ok());
    EXPECT_FALSE(parse_cache_json(nlohmann::json::parse(R"({"velocity": {"bogus": 1}})")).ok());
    EXPECT_FALSE(quality_preset("ultra").ok());
    // schedule-dependent checks
    EXPECT_FALSE(validate_for_steps(*parse_cache_spec("dbcache:refresh=9"), 9, 4).ok());
    EXPECT_TRUE(validate_for_steps(*parse_cache_spec("dbcache:Fn=1,refresh=8"), 9, 4).ok());
    EXPECT_FALSE(validate_for_steps(*parse_cache_spec("dbcache:Fn=3,Bn=1"), 9, 4).ok());
    EXPECT_FALSE(validate_for_steps(*parse_cache_spec("dbcache:Fn=1,scm=1101"), 9, 4).ok());
    EXPECT_FALSE(validate_for_steps(*parse_cache_spec("dbcache:Fn=1,scm=fast"), 5, 4).ok());
}

TEST(CacheWork, FlopsAndSummary) {
    model::DitConfig c; // full size: P_blk = 385.35 M
    EXPECT_NEAR(block_flops(c, 1) - 4.0 * 7168, 2 * 385.35e6, 0.01e6);
    WorkReport w;
    for (int i = 0; i < 3; ++i) {
        StepRecord r;
        r.step = i;
        r.blocks_executed = i == 1 ? 1 : 50;
        r.blocks_skipped = 50 - r.blocks_executed;
        r.cache_hit = i == 1;
        r.useful_flops = 1e12 * r.blocks_executed;
        r.seconds = 1;
        w.steps.push_back(r);
    }
    EXPECT_EQ(w.cache_hits(), 1);
    EXPECT_EQ(w.blocks_executed(), 101);
    EXPECT_EQ(w.summary(), "steps 3, DiT calls 3, cache hits 1, blocks run 101/150, 34 TFLOP/s");
    EXPECT_EQ(w.to_json()["per_step"].size(), 3u);
}
