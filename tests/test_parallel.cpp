// The DiT on a device group of CPU ranks (issue #17): generate_latents_on_group with sp 2 / 4, tp 2,
// sp 2 × tp 2, ring 2 and sp 2 × ring 2 against the single-rank run (fp32, within 1e-5 relative) for t2va,
// fl2va and ref2va, with and without DBCache; cache decisions made on the group-wide probe distance even
// where a rank's own distance would decide otherwise; a rank that throws or stalls fails the job on every
// rank in bounded time; the degrees the heads allow; per-block communication bytes.
#include "cache/cache_spec.h"
#include "model/dit/dit_model.h"
#include "model/latent_spec.h"
#include "model/lora/lora_random.h"
#include "model/lora/lora_set.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/tiny/tiny_vae.h"
#include "pipeline/decode.h"
#include "pipeline/decode_group.h"
#include "pipeline/generate_group.h"
#include "pipeline/generator.h"
#include "pipeline/group_broadcast.h"
#include "pipeline/job_builder.h"
#include "runtime/device_session.h"
#include "runtime/launcher.h"
#include "runtime/model_store.h"

#include "generate_setup.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

using namespace h3;
using namespace h3::pipeline;
using namespace std::chrono_literals;

namespace {

// A tiny checkpoint whose DiTs have 8 heads (sp·tp up to 8), written once per test binary.
const std::string& tiny_dir() {
    static const std::string dir = [] {
        const std::string d = std::string(H3_BINARY_DIR) + "/test_parallel_tiny";
        std::filesystem::remove_all(d);
        model::TinyCheckpointParams p;
        p.dir = d;
        p.seed = 11;
        p.geometry.dit_heads = 8;
        const Status s = model::write_tiny_checkpoint(p);
        EXPECT_TRUE(s.ok()) << s.to_string();
        return d;
    }();
    return dir;
}

std::unique_ptr<model::DitModel> load(const std::string& sub) {
    auto ck = model::open_dit_checkpoint(tiny_dir() + "/" + sub);
    EXPECT_TRUE(ck.ok()) << ck.status().to_string();
    auto m = model::DitModel::load(*ck, {.device = Device::cpu(), .precision = model::DitPrecision::kFp32},
                                   ops::Context::cpu());
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return std::move(m).value();
}

const model::DitModel& fl2va_dit() {
    static auto m = load("transformer");
    return *m;
}
const model::DitModel& ref2va_dit() {
    static auto m = load("transformer_ref");
    return *m;
}

Tensor random_tensor(const Shape& s, uint32_t seed) {
    return test::random_normal(s, seed);
}

enum class Flow { kT2va, kFl2va, kRef2va };
const char* task_name(Flow t) {
    return t == Flow::kT2va ? "t2va" : t == Flow::kFl2va ? "fl2va" : "ref2va";
}

struct Case {
    const model::DitModel* model;
    Conditioning cond;
    GenerationRequest rq;
};

// 64x32, 107 frames: ~200 packed rows; `text_rows` moves S so that some runs need padding rows.
Case make_case(Flow task, int text_rows, const std::string& cache = "none") {
    Case c;
    c.model = task == Flow::kRef2va ? &ref2va_dit() : &fl2va_dit();
    const Geometry g = test::geometry_64x32(*c.model);
    c.rq.geometry = g;
    c.rq.steps = 6;
    c.rq.seed = 5;
    auto cs = cache::parse_cache_spec(cache);
    EXPECT_TRUE(cs.ok()) << cs.status().to_string();
    c.rq.cache = *cs;
    c.cond.embeddings = random_tensor(Shape{text_rows, c.model->config().text_dim}, 3);
    c.cond.tags.assign(static_cast<size_t>(text_rows), kTagText);
    const int C = c.model->config().in_channels;
    if (task == Flow::kFl2va)
        c.rq.keyframes = {{KeyframeAnchor::kFirst, random_tensor(Shape{1, C, 1, g.latent_h, g.latent_w}, 8)},
                          {KeyframeAnchor::kLast, random_tensor(Shape{1, C, 1, g.latent_h, g.latent_w}, 9)}};
    if (task == Flow::kRef2va) {
        ReferenceCondition image;
        image.kind = ReferenceKind::kImage;
        image.latents = random_tensor(Shape{1, C, 1, g.latent_h, g.latent_w}, 10);
        c.rq.references = {image};
    }
    return c;
}

using test::rel_err;

runtime::ParallelPlan plan(int sp, int tp, int ring = 1) {
    runtime::ParallelPlan p;
    p.sp = sp;
    p.tp = tp;
    p.ring = ring;
    return p;
}

struct Degrees {
    int sp, tp, ring = 1;
    int world() const { return sp * tp * ring; }
};

} // namespace

class GroupParity : public ::testing::TestWithParam<std::tuple<Flow, bool>> {};

TEST_P(GroupParity, LatentsEqualTheSingleRankRun) {
    const auto [task, dbcache] = GetParam();
    const std::string cache = dbcache ? "dbcache:Fn=1,Bn=0,rdt=0.5,warmup=1" : "none";
    // t2va with S and S+1 rows (one of them odd, so sp 2 and 4 pad); the other tasks with one length.
    const std::vector<int> lengths = task == Flow::kT2va ? std::vector<int>{7, 8} : std::vector<int>{7};
    for (int text_rows : lengths) {
        Case c = make_case(task, text_rows, cache);
        if (!dbcache) c.rq.steps = 4;
        auto single = generate_latents(*c.model, c.cond, c.rq);
        ASSERT_TRUE(single.ok()) << single.status().to_string();
        for (Degrees d : {Degrees{2, 1}, Degrees{4, 1}, Degrees{1, 2}, Degrees{2, 2}, Degrees{1, 1, 2},
                          Degrees{2, 1, 2}}) {
            SCOPED_TRACE(std::string(task_name(task)) + " " + cache + " text " + std::to_string(text_rows) +
                         " sp " + std::to_string(d.sp) + " tp " + std::to_string(d.tp) + " ring " +
                         std::to_string(d.ring));
            auto group = generate_latents_on_group(*c.model, c.cond, c.rq, {}, plan(d.sp, d.tp, d.ring));
            ASSERT_TRUE(group.ok()) << group.status().to_string();
            EXPECT_LE(rel_err(group->video_latents, single->video_latents), 1e-5);
            EXPECT_LE(rel_err(group->audio_latents, single->audio_latents), 1e-5);
            EXPECT_GT(rel_err(group->video_latents, group->video_noise), 0.05); // the loop moved them
            // The same cache decisions; the useful work totalled over the ranks, each rank's share listed.
            ASSERT_EQ(group->work.steps.size(), single->work.steps.size());
            for (size_t i = 0; i < single->work.steps.size(); ++i) {
                EXPECT_EQ(group->work.steps[i].cache_hit, single->work.steps[i].cache_hit) << "step " << i;
                EXPECT_NEAR(group->work.steps[i].useful_flops, single->work.steps[i].useful_flops,
                            1e-6 * single->work.steps[i].useful_flops);
            }
            EXPECT_EQ(group->work.ranks, d.world());
            ASSERT_EQ(group->work.rank_useful_flops.size(), static_cast<size_t>(d.world()));
            EXPECT_NEAR(group->work.rank_useful_flops[0] * d.world(), single->work.useful_flops(),
                        1e-6 * single->work.useful_flops());
            if (dbcache) {
                EXPECT_GT(single->work.cache_hits(), 0) << "the DBCache case must skip blocks";
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Tasks, GroupParity,
                         ::testing::Combine(::testing::Values(Flow::kT2va, Flow::kFl2va, Flow::kRef2va),
                                            ::testing::Bool()),
                         [](const auto& info) {
                             return std::string(task_name(std::get<0>(info.param))) +
                                    (std::get<1>(info.param) ? "_dbcache" : "_nocache");
                         });

// The probe distance is reduced over the ranks before the rule: with the threshold between rank 0's own
// distance and the group's at some step, rank 0 alone would decide otherwise, yet every rank (and the
// single-rank run) decides by the group's value.
TEST(GroupCache, DecisionsFollowTheGroupDistanceNotTheRankOwn) {
    Case probe = make_case(Flow::kT2va, 7, "dbcache:Fn=1,Bn=0,rdt=0.99,warmup=1");
    auto first = generate_latents_on_group(*probe.model, probe.cond, probe.rq, {}, plan(2, 1));
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    // A step where the distances differ most: its midpoint is the threshold of the second run. Every
    // distance before it is computed on the same state (the first probe follows the warmup step in both
    // runs), so pick the first step that has both.
    double thresh = -1;
    size_t at = 0;
    for (size_t i = 0; i < first->work.steps.size(); ++i) {
        const auto& s = first->work.steps[i];
        if (s.diff >= 0 && s.local_diff >= 0 && std::fabs(s.diff - s.local_diff) > 1e-3 * s.diff) {
            thresh = 0.5 * (s.diff + s.local_diff);
            at = i;
            break;
        }
    }
    ASSERT_GT(thresh, 0) << "no step whose rank-0 distance differs from the group's: "
                         << first->work.to_json().dump();
    std::ostringstream spec;
    spec << std::setprecision(17) << "dbcache:Fn=1,Bn=0,rdt=" << thresh << ",warmup=1";
    Case c = make_case(Flow::kT2va, 7, spec.str());
    auto single = generate_latents(*c.model, c.cond, c.rq);
    ASSERT_TRUE(single.ok());
    auto group = generate_latents_on_group(*c.model, c.cond, c.rq, {}, plan(2, 1)); // ranks agree (checked)
    ASSERT_TRUE(group.ok()) << group.status().to_string();
    const auto& s = group->work.steps[at];
    ASSERT_GE(s.local_diff, 0);
    const bool group_hits = s.diff < thresh, rank0_alone_hits = s.local_diff < thresh;
    EXPECT_NE(group_hits, rank0_alone_hits) << "diff " << s.diff << " local " << s.local_diff;
    EXPECT_EQ(s.cache_hit, group_hits);
    for (size_t i = 0; i < single->work.steps.size(); ++i)
        EXPECT_EQ(group->work.steps[i].cache_hit, single->work.steps[i].cache_hit) << "step " << i;
    EXPECT_LE(rel_err(group->video_latents, single->video_latents), 1e-5);
}

TEST(GroupFailure, ARankThatThrowsFailsTheJobOnEveryRank) {
    Case c = make_case(Flow::kT2va, 7);
    GroupOptions go;
    go.comm.timeout = 60s; // the failure must come from the abort, far sooner
    go.per_rank = [](const runtime::DeviceGroup::Rank& r, DenoiseOptions& o) {
        if (r.rank == 1)
            o.progress = [](const StepProgress& p) {
                if (p.step == 2) throw std::runtime_error("injected failure after step 2");
            };
        return ok_status();
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto out = generate_latents_on_group(*c.model, c.cond, c.rq, {}, plan(2, 2), go);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("rank 1 of 4"), std::string::npos) << out.status().message();
    EXPECT_NE(out.status().message().find("injected failure"), std::string::npos) << out.status().message();
    EXPECT_LT(s, 20.0);
    // The next job on the same model runs (nothing of the failed group is left behind).
    auto again = generate_latents_on_group(*c.model, c.cond, c.rq, {}, plan(2, 2));
    ASSERT_TRUE(again.ok()) << again.status().to_string();
}

TEST(GroupFailure, ARankThatStallsTimesOutOnEveryRank) {
    Case c = make_case(Flow::kT2va, 7);
    GroupOptions go;
    go.comm.timeout = 300ms;
    go.per_rank = [](const runtime::DeviceGroup::Rank& r, DenoiseOptions& o) {
        if (r.rank == 0)
            o.progress = [](const StepProgress& p) {
                if (p.step == 1) std::this_thread::sleep_for(1500ms);
            };
        return ok_status();
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto out = generate_latents_on_group(*c.model, c.cond, c.rq, {}, plan(2, 1), go);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("timed out"), std::string::npos) << out.status().message();
    EXPECT_NE(out.status().message().find("rank(s) 0"), std::string::npos) << out.status().message();
    EXPECT_LT(s, 20.0);
}

TEST(GroupDegrees, HeadsMustSplitEvenly) {
    Case c = make_case(Flow::kT2va, 7);
    auto out = generate_latents_on_group(*c.model, c.cond, c.rq, {}, plan(3, 1));
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("allowed sp·tp: 1, 2, 4, 8"), std::string::npos)
        << out.status().message();
    model::DitConfig full; // the released 56 heads
    const Status s = model::check_parallel_degrees(full, 3, 1);
    EXPECT_NE(s.message().find("1, 2, 4, 7, 8, 14, 28, 56"), std::string::npos) << s.message();
    EXPECT_TRUE(model::check_parallel_degrees(full, 7, 8).ok());
    EXPECT_FALSE(model::check_parallel_degrees(full, 4, 4).ok());
    // The ring splits the sequence, not the heads: any degree ≥ 1 (3 ranks of a ring over 8 heads run).
    EXPECT_TRUE(model::check_parallel_degrees(full, 8, 1, 3).ok());
    const Status r0 = model::check_parallel_degrees(full, 2, 1, 0);
    EXPECT_NE(r0.message().find("ring 0"), std::string::npos) << r0.message();
    auto bad = generate_latents_on_group(*c.model, c.cond, c.rq, {}, plan(1, 1, 0));
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("ring 0"), std::string::npos) << bad.status().message();
}

// More ring ranks than the sequence has chunks of real rows (ring 3 × sp 2 over ~200 rows pads every
// chunk unevenly; ring 8 leaves chunks of padding only): still the single-rank latents.
TEST(GroupRing, UnevenAndPaddingOnlyChunks) {
    Case c = make_case(Flow::kT2va, 7);
    c.rq.steps = 2;
    auto single = generate_latents(*c.model, c.cond, c.rq);
    ASSERT_TRUE(single.ok()) << single.status().to_string();
    for (Degrees d : {Degrees{2, 1, 3}, Degrees{1, 1, 8}}) {
        SCOPED_TRACE("sp " + std::to_string(d.sp) + " ring " + std::to_string(d.ring));
        auto group = generate_latents_on_group(*c.model, c.cond, c.rq, {}, plan(d.sp, d.tp, d.ring));
        ASSERT_TRUE(group.ok()) << group.status().to_string();
        EXPECT_LE(rel_err(group->video_latents, single->video_latents), 1e-5);
        EXPECT_LE(rel_err(group->audio_latents, single->audio_latents), 1e-5);
    }
}

// bench dit --sp 1 [--ring 1] times the group's code path on one rank (size-1 communicators, forced): it
// computes what the plain path does.
TEST(GroupRing, OneRankGroupPathEqualsThePlainPath) {
    Case c = make_case(Flow::kT2va, 7, "dbcache:Fn=1,Bn=0,rdt=0.5,warmup=1");
    c.rq.steps = 3;
    auto single = generate_latents(*c.model, c.cond, c.rq);
    ASSERT_TRUE(single.ok()) << single.status().to_string();
    for (int path = 0; path < 3; ++path) { // ulysses, ring, ulysses + ring
        SCOPED_TRACE("path " + std::to_string(path));
        runtime::ParallelPlan p;
        p.force_sequence_path = path != 1;
        p.force_ring_path = path != 0;
        auto group = runtime::DeviceGroup::create(p, ops::Context::cpu());
        ASSERT_TRUE(group.ok()) << group.status().to_string();
        const model::DitParallel& dit = (*group)->rank(0).dit;
        ASSERT_TRUE(dit.active());
        EXPECT_EQ(dit.sp != nullptr, path != 1);
        EXPECT_EQ(dit.ring != nullptr, path != 0);
        DenoiseOptions o;
        o.parallel = &dit;
        auto out = generate_latents(*c.model, c.cond, c.rq, o);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        EXPECT_LE(rel_err(out->video_latents, single->video_latents), 1e-5);
        EXPECT_LE(rel_err(out->audio_latents, single->audio_latents), 1e-5);
    }
}

// Ulysses in head groups (issue #46's overlap: each group's all-to-alls on the communication lane while the
// previous group's attention runs) and the ring's gathers on the lane under the own chunk's attention: the
// same latents as one rank for every grouping the heads allow, with padding rows (7 text rows), at sp 2, on
// the forced one-rank path, and with a ring with and without the lane.
TEST(GroupOverlap, HeadGroupsEqualOneRank) {
    Case c = make_case(Flow::kT2va, 7);
    c.rq.steps = 3;
    auto single = generate_latents(*c.model, c.cond, c.rq);
    ASSERT_TRUE(single.ok()) << single.status().to_string();
    const int heads = c.model->config().num_attention_heads;
    EXPECT_EQ(model::ulysses_overlap_groups(56 / 8, 0, false), 1); // 7 heads: too few for 2 groups of 4
    EXPECT_EQ(model::ulysses_overlap_groups(56 / 2, 0, false), 2);
    EXPECT_EQ(model::ulysses_overlap_groups(56 / 2, 3, false), 1); // not a divisor: no grouping
    EXPECT_EQ(model::ulysses_overlap_groups(56, 0, true), 1);      // the ring keeps one group
    struct Run {
        int sp, groups;
        bool forced;
        int ring = 1; // the ring: its gathers on the lane (groups 0) or on the compute stream (groups 1)
    };
    for (Run run : {Run{2, 2, false}, Run{2, 4, false}, Run{1, 2, true}, Run{1, heads, true},
                    Run{2, 0, false, 2}, Run{2, 1, false, 2}, Run{1, 1, false, 3}}) {
        SCOPED_TRACE("sp " + std::to_string(run.sp) + " groups " + std::to_string(run.groups) + " ring " +
                     std::to_string(run.ring));
        ASSERT_EQ(heads / run.sp % std::max(run.groups, 1), 0);
        runtime::ParallelPlan p = plan(run.sp, 1, run.ring);
        p.force_sequence_path = run.forced;
        p.overlap_groups = run.groups;
        if (run.forced) {
            auto group = runtime::DeviceGroup::create(p, ops::Context::cpu());
            ASSERT_TRUE(group.ok()) << group.status().to_string();
            DenoiseOptions o;
            o.parallel = &(*group)->rank(0).dit;
            auto out = generate_latents(*c.model, c.cond, c.rq, o);
            ASSERT_TRUE(out.ok()) << out.status().to_string();
            EXPECT_LE(rel_err(out->video_latents, single->video_latents), 1e-5);
            EXPECT_LE(rel_err(out->audio_latents, single->audio_latents), 1e-5);
            continue;
        }
        auto group = generate_latents_on_group(*c.model, c.cond, c.rq, {}, p);
        ASSERT_TRUE(group.ok()) << group.status().to_string();
        EXPECT_LE(rel_err(group->video_latents, single->video_latents), 1e-5);
        EXPECT_LE(rel_err(group->audio_latents, single->audio_latents), 1e-5);
        EXPECT_GT(rel_err(group->video_latents, group->video_noise), 0.05);
    }
}

// Tensor parallel in the other weight formats and with run-time adapters (issue #46): int8 (W8A16, resident
// and layerwise), layerwise native, fp16 (fp32 residual stream), fp8 (e4m3 GEMMs) and run-time LoRA, at tp 2
// (and sp 2 × tp 2, where every rank streams or dequantizes its own slices) against the same model on one
// rank. The int8 slices keep their rows' scales and the adapters' terms join the fp32 partials, so those
// equal one rank within fp32's summation order; fp16 rounds the reduced partials once as one rank rounds
// its GEMM; fp8's row-split GEMMs round their inputs per row over the rank's columns (the per-shard scales),
// which one rank's fp8 run does over the whole row.
struct TpFormat {
    std::string name;
    model::DitLoadOptions load;
    bool lora = false;
    double bound = 1e-5; // the group vs one rank of this format
    double moved = 0.0;  // the format's single rank vs the plain one at least (it is in use); 0: equal
    model::DitPrecision plain = model::DitPrecision::kFp32; // the plain run's precision (resident, native)
    std::vector<Degrees> degrees = {Degrees{1, 2}};
};

TEST(GroupTpFormats, EachFormatEqualsOneRank) {
    using model::DitPrecision;
    using model::Residency;
    using model::WeightFormat;
    auto ck = model::open_dit_checkpoint(tiny_dir() + "/transformer");
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    model::ResidencyOptions int8, layerwise;
    int8.format = WeightFormat::kInt8;
    layerwise.mode = Residency::kLayerwise;
    layerwise.resident_layers = 1;
    model::ResidencyOptions layerwise_int8 = layerwise;
    layerwise_int8.format = WeightFormat::kInt8;
    const std::vector<TpFormat> formats = {
        {.name = "int8", .load = {.precision = DitPrecision::kFp32, .residency = int8}, .moved = 1e-4},
        {.name = "layerwise int8",
         .load = {.precision = DitPrecision::kFp32, .residency = layerwise_int8},
         .moved = 1e-4,
         .degrees = {Degrees{1, 2}, Degrees{2, 2}}},
        {.name = "layerwise", .load = {.precision = DitPrecision::kFp32, .residency = layerwise}},
        {.name = "fp16", .load = {.precision = DitPrecision::kFp16}, .bound = 2e-4, .moved = 1e-4},
        {.name = "fp8",
         .load = {.precision = DitPrecision::kFp8},
         .bound = 1e-4,
         .moved = 1e-3,
         .plain = DitPrecision::kBf16},
        {.name = "runtime lora",
         .load = {.precision = DitPrecision::kFp32},
         .lora = true,
         .moved = 1e-3,
         .degrees = {Degrees{1, 2}, Degrees{2, 2}}},
    };
    Case c = make_case(Flow::kT2va, 7);
    c.rq.steps = 2;
    for (const TpFormat& f : formats) {
        SCOPED_TRACE(f.name);
        auto base = model::DitModel::load(*ck, {.precision = f.plain}, ops::Context::cpu());
        ASSERT_TRUE(base.ok()) << base.status().to_string();
        auto plain = generate_latents(**base, c.cond, c.rq);
        ASSERT_TRUE(plain.ok()) << plain.status().to_string();
        auto m = model::DitModel::load(*ck, f.load, ops::Context::cpu());
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        DenoiseOptions o;
        std::shared_ptr<const model::LoraSet> set;
        if (f.lora) {
            auto adapter = model::random_lora_adapter(
                (*m)->config(), {.rank = 4, .dtype = DType::kF32, .seed = 7, .scale = 4.0f});
            ASSERT_TRUE(adapter.ok()) << adapter.status().to_string();
            auto built = model::LoraSet::build(
                {{std::make_shared<const model::LoraAdapter>(std::move(adapter).value()), 1.0f}},
                (*m)->config(), ops::Context::cpu(), (*m)->act_dtype());
            ASSERT_TRUE(built.ok()) << built.status().to_string();
            set = *built;
            o.lora = set.get();
        }
        auto single = generate_latents(**m, c.cond, c.rq, o);
        ASSERT_TRUE(single.ok()) << single.status().to_string();
        const double moved = rel_err(single->video_latents, plain->video_latents);
        std::printf("%s: one rank vs plain %s %.3g\n", f.name.c_str(), model::precision_name(f.plain), moved);
        if (f.moved > 0)
            EXPECT_GT(moved, f.moved) << "the format did not change the latents: is it in use?";
        else
            EXPECT_LE(moved, 1e-6);
        for (Degrees d : f.degrees) {
            SCOPED_TRACE("sp " + std::to_string(d.sp) + " tp " + std::to_string(d.tp));
            auto group = generate_latents_on_group(**m, c.cond, c.rq, o, plan(d.sp, d.tp, d.ring));
            ASSERT_TRUE(group.ok()) << group.status().to_string();
            const double ev = rel_err(group->video_latents, single->video_latents),
                         ea = rel_err(group->audio_latents, single->audio_latents);
            std::printf("%s sp %d tp %d: video %.3g audio %.3g\n", f.name.c_str(), d.sp, d.tp, ev, ea);
            EXPECT_LE(ev, f.bound);
            EXPECT_LE(ea, f.bound);
        }
    }
}

// The ranks of one process share the model's weight source: sequence-parallel ranks as threads over int8 or
// layerwise weights are refused, naming the fields and what to use instead.
TEST(GroupTpFormats, SequenceRanksAsThreadsNeedResidentWeights) {
    auto ck = model::open_dit_checkpoint(tiny_dir() + "/transformer");
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    model::DitLoadOptions int8{.precision = model::DitPrecision::kFp32};
    int8.residency.format = model::WeightFormat::kInt8;
    auto m = model::DitModel::load(*ck, int8, ops::Context::cpu());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    Case c = make_case(Flow::kT2va, 7);
    c.rq.steps = 1;
    auto out = generate_latents_on_group(**m, c.cond, c.rq, {}, plan(2, 1));
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("parallel.sp"), std::string::npos) << out.status().message();
    EXPECT_NE(out.status().message().find("parallel.tp"), std::string::npos) << out.status().message();
    EXPECT_EQ(out.status().message().find("--"), std::string::npos) << out.status().message();
}

namespace {
int free_port() { // a port the kernel just handed out (bound and released)
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    const int port = ntohs(a.sin_port);
    ::close(fd);
    return port;
}
} // namespace

// Ranks as processes by the launcher convention (issue #46): two "hosts" of two processes each on 127.0.0.1
// (threads standing in for the processes, each with its own ProcessRank: RANK 0..3, LOCAL_RANK 0/1 per
// host, one MASTER_ADDR:MASTER_PORT). The TCP world is split into the sequence, Ulysses, ring and
// tensor-parallel groups: sp 2 inside a host × ring 2 across the hosts, and sp 2 × tp 2, give every rank
// the in-process group's latents bit for bit (the TCP sums are the in-process backend's), which equal the
// single-rank run within fp32's summation order.
TEST(GroupLaunched, TwoHostsOfTwoProcessesEqualOneProcess) {
    Case c = make_case(Flow::kT2va, 7);
    c.rq.steps = 2;
    auto single = generate_latents(*c.model, c.cond, c.rq);
    ASSERT_TRUE(single.ok()) << single.status().to_string();
    for (Degrees d : {Degrees{2, 1, 2}, Degrees{2, 2, 1}}) {
        SCOPED_TRACE("sp " + std::to_string(d.sp) + " tp " + std::to_string(d.tp) + " ring " +
                     std::to_string(d.ring));
        auto threads = generate_latents_on_group(*c.model, c.cond, c.rq, {}, plan(d.sp, d.tp, d.ring));
        ASSERT_TRUE(threads.ok()) << threads.status().to_string();
        const int port = free_port(), world = d.world();
        std::vector<Status> st(static_cast<size_t>(world));
        std::vector<GenerationOutput> outs(static_cast<size_t>(world));
        std::vector<std::thread> procs;
        for (int r = 0; r < world; ++r)
            procs.emplace_back([&, r] {
                runtime::ParallelPlan p = plan(d.sp, d.tp, d.ring);
                p.process = {.rank = r,
                             .world = world,
                             .local_rank = r % 2,
                             .master_addr = "127.0.0.1",
                             .master_port = port};
                GroupOptions go;
                go.comm.timeout = std::chrono::seconds(60);
                auto out = generate_latents_on_group(*c.model, c.cond, c.rq, {}, p, go);
                st[static_cast<size_t>(r)] = out.status();
                if (out.ok()) outs[static_cast<size_t>(r)] = std::move(out).value();
            });
        for (auto& t : procs) t.join();
        for (int r = 0; r < world; ++r) {
            ASSERT_TRUE(st[static_cast<size_t>(r)].ok())
                << "rank " << r << ": " << st[static_cast<size_t>(r)].to_string();
            const GenerationOutput& o = outs[static_cast<size_t>(r)];
            ASSERT_EQ(o.video_latents.nbytes(), threads->video_latents.nbytes());
            EXPECT_EQ(
                std::memcmp(o.video_latents.data(), threads->video_latents.data(), o.video_latents.nbytes()),
                0)
                << "rank " << r << "'s video latents differ from the in-process group's";
            EXPECT_EQ(
                std::memcmp(o.audio_latents.data(), threads->audio_latents.data(), o.audio_latents.nbytes()),
                0)
                << "rank " << r << "'s audio latents differ from the in-process group's";
            EXPECT_LE(rel_err(o.video_latents, single->video_latents), 1e-5);
        }
    }
}

// The launcher convention from the environment: RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT;
// under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) MASTER_PORT is the agent's own store, so rank 0 listens
// on the port after it, or on H3_MASTER_PORT when that is set.
TEST(GroupLaunched, EnvironmentConvention) {
    struct Env {
        const char* name;
        const char* value;
    };
    auto with_env = [](std::vector<Env> env) {
        for (const char* n : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                              "H3_MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"})
            ::unsetenv(n);
        for (const Env& e : env) ::setenv(e.name, e.value, 1);
        auto r = runtime::process_rank_from_env();
        for (const Env& e : env) ::unsetenv(e.name);
        return r;
    };
    auto plain = with_env({{"RANK", "3"},
                           {"WORLD_SIZE", "4"},
                           {"LOCAL_RANK", "1"},
                           {"MASTER_ADDR", "10.0.0.7"},
                           {"MASTER_PORT", "29600"}});
    ASSERT_TRUE(plain.ok() && plain->has_value()) << plain.status().to_string();
    EXPECT_EQ((*plain)->rank, 3);
    EXPECT_EQ((*plain)->world, 4);
    EXPECT_EQ((*plain)->local_rank, 1);
    EXPECT_EQ((*plain)->master_addr, "10.0.0.7");
    EXPECT_EQ((*plain)->master_port, 29600);
    auto torchrun = with_env({{"RANK", "0"},
                              {"WORLD_SIZE", "2"},
                              {"MASTER_PORT", "29600"},
                              {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
    ASSERT_TRUE(torchrun.ok() && torchrun->has_value()) << torchrun.status().to_string();
    EXPECT_EQ((*torchrun)->master_port, 29601);
    EXPECT_EQ((*torchrun)->local_rank, 0); // LOCAL_RANK defaults to RANK
    auto own = with_env({{"RANK", "0"},
                         {"WORLD_SIZE", "2"},
                         {"MASTER_PORT", "29600"},
                         {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                         {"H3_MASTER_PORT", "31000"}});
    ASSERT_TRUE(own.ok() && own->has_value()) << own.status().to_string();
    EXPECT_EQ((*own)->master_port, 31000);
    auto bad = with_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"H3_MASTER_PORT", "0"}});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("H3_MASTER_PORT"), std::string::npos) << bad.status().message();
    auto none = with_env({});
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
}

TEST(GroupDistance, PaddingRowsDoNotCount) {
    // One rank: rows past `valid` are ignored.
    Tensor cur = random_tensor(Shape{4, 3}, 1), ref = random_tensor(Shape{4, 3}, 2);
    auto all = model::group_rel_l1(ops::Context::cpu(), nullptr, 4, cur, ref);
    auto two = model::group_rel_l1(ops::Context::cpu(), nullptr, 2, cur, ref);
    ASSERT_TRUE(all.ok() && two.ok());
    for (int64_t i = 2 * 3; i < 4 * 3; ++i) cur.data_as<float>()[i] = 1e6f; // garbage in the padding rows
    auto two_again = model::group_rel_l1(ops::Context::cpu(), nullptr, 2, cur, ref);
    ASSERT_TRUE(two_again.ok());
    EXPECT_EQ(*two, *two_again);
    EXPECT_NE(*all, *two);
}

TEST(GroupBytes, PerBlockCommunication) {
    model::DitConfig full;
    const int64_t S = 33000;
    const auto sp4 = model::block_comm_bytes(full, S, 4, 1, 2);
    // q, k, v, o: [S/4, 7168] bf16 each, 3/4 of it leaves the rank.
    EXPECT_DOUBLE_EQ(sp4.all_to_all, 4.0 * (S / 4.0) * 7168 * 2 * 3 / 4);
    EXPECT_EQ(sp4.all_reduce, 0);
    const auto tp2 = model::block_comm_bytes(full, S, 1, 2, 2);
    EXPECT_DOUBLE_EQ(tp2.all_reduce, 2.0 * S * full.hidden_size * 4 * 2 * 1 / 2);
    // sp 2 × ring 4: each rank's chunk of S/4 rows × 7168/2 channels of k and v, passed on 3 times; the
    // Ulysses part over S/8 rows.
    const auto ring4 = model::block_comm_bytes(full, S, 2, 1, 2, 4);
    EXPECT_DOUBLE_EQ(ring4.ring, 2.0 * (S / 4.0) * (7168 / 2) * 2 * 3);
    EXPECT_DOUBLE_EQ(ring4.all_to_all, 4.0 * (S / 8.0) * 7168 * 2 * 1 / 2);
    EXPECT_EQ(sp4.ring, 0);
    // The README's table (Multi-GPU): 1344×768×124 with a 537-row prompt, bf16 activations.
    const int64_t S_readme = 38247;
    const double MiB = 1024.0 * 1024.0;
    std::printf("degree | rows/rank | all-to-all MiB | ring MiB | all-reduce MiB | per forward GiB\n");
    for (Degrees d :
         {Degrees{2, 1}, Degrees{4, 1}, Degrees{8, 1}, Degrees{1, 2}, Degrees{1, 4}, Degrees{1, 8},
          Degrees{1, 1, 2}, Degrees{1, 1, 4}, Degrees{1, 1, 8}, Degrees{8, 1, 2}}) {
        const auto b = model::block_comm_bytes(full, S_readme, d.sp, d.tp, 2, d.ring);
        const double rows = std::ceil(static_cast<double>(S_readme) / (d.sp * d.ring));
        std::printf("sp %d tp %d ring %d | %.0f | %.1f | %.1f | %.1f | %.1f\n", d.sp, d.tp, d.ring, rows,
                    b.all_to_all / MiB, b.ring / MiB, b.all_reduce / MiB,
                    50 * (b.all_to_all + b.ring + b.all_reduce) / (MiB * 1024));
    }
}

// The Generator on a plan with a device group (what `generate --sp` and every server job run): a rank that
// throws mid-denoise fails the job, and the same generator runs the next job, whose latents equal the
// single-rank plan's.
TEST(GroupGenerator, AFailedJobLeavesTheGeneratorServing) {
    auto job_input = [] {
        pipeline::JobInput in;
        in.random_prompt_embeds = 6;
        in.size = "64x32";
        in.frames = 107;
        in.num_inference_steps = 4;
        in.seed = 2;
        in.outputs.latents = std::string(H3_BINARY_DIR) + "/test_parallel_job.safetensors";
        return in;
    };
    auto run = [&](runtime::PlacementPlan plan, const JobEvents& ev) -> Result<JobReport> {
        auto store = runtime::ModelStore::open(tiny_dir(), plan);
        if (!store.ok()) return store.status();
        H3_ASSIGN_OR_RETURN(auto gen, Generator::create(**store));
        const JobBuilder builder((*store)->info());
        H3_ASSIGN_OR_RETURN(GenerationJob job, builder.build(job_input()));
        auto first = gen->run(job, ev);
        if (!ev.progress) return first;
        EXPECT_FALSE(first.ok());
        if (!first.ok()) {
            EXPECT_NE(first.status().message().find("rank 0 of 4"), std::string::npos)
                << first.status().message();
        }
        return gen->run(job, {}); // the same generator and store, after the failure
    };
    runtime::PlacementPlan single =
        runtime::PlacementPlan::per_job(Device::cpu(), runtime::ComputePrecision::kFp32);
    auto base = run(single, {});
    ASSERT_TRUE(base.ok()) << base.status().to_string();
    runtime::PlacementPlan group = single;
    group.parallel.sp = 2;
    group.parallel.tp = 2;
    JobEvents failing;
    failing.progress = [](const JobProgress& p) {
        if (p.stage == Stage::kDenoise && p.step == 2) throw std::runtime_error("injected progress failure");
    };
    auto after = run(group, failing);
    ASSERT_TRUE(after.ok()) << after.status().to_string();
    EXPECT_LE(rel_err(after->video_latents, base->video_latents), 1e-5);
    EXPECT_LE(rel_err(after->audio_latents, base->audio_latents), 1e-5);
    EXPECT_NE(after->placement.find("dit group sp 2 x tp 2 (4 ranks on cpu)"), std::string::npos)
        << after->placement;
    EXPECT_EQ(after->work.ranks, 4);
}

// The encode stage's outputs travel as bytes through the communicator: every rank but the root starts
// empty and ends with the root's tensors bit for bit (undefined ones stay undefined); a cut payload is an
// error naming what is missing.
TEST(GroupBroadcast, EncodedInputsReachEveryRank) {
    EncodedInputs sent;
    sent.conditioning.embeddings = random_tensor(Shape{5, 16}, 21);
    sent.conditioning.tags = {kTagText, kTagText, kTagVideo, kTagVideo, kTagText};
    sent.keyframes = {{KeyframeAnchor::kLast, random_tensor(Shape{1, 4, 1, 2, 3}, 22)}};
    ReferenceCondition audio_only;
    audio_only.kind = ReferenceKind::kAudio;
    audio_only.audio_rows = random_tensor(Shape{6, 8}, 23);
    sent.references = {audio_only};
    auto group = runtime::DeviceGroup::create(plan(4, 1), ops::Context::cpu());
    ASSERT_TRUE(group.ok()) << group.status().to_string();
    std::vector<EncodedInputs> got(4);
    got[0] = sent;
    ASSERT_TRUE((*group)
                    ->run_spmd([&](runtime::DeviceGroup::Rank& r) {
                        return broadcast_encoded_inputs(r.ctx, *r.world, got[static_cast<size_t>(r.local)]);
                    })
                    .ok());
    auto same = [](const Tensor& a, const Tensor& b) {
        if (!a.defined() || !b.defined()) return a.defined() == b.defined();
        return a.shape() == b.shape() && a.dtype() == b.dtype() &&
               std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
    };
    for (int r = 1; r < 4; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        const EncodedInputs& g = got[static_cast<size_t>(r)];
        EXPECT_NE(g.conditioning.embeddings.data(),
                  sent.conditioning.embeddings.data()); // a copy, not shared
        EXPECT_TRUE(same(g.conditioning.embeddings, sent.conditioning.embeddings));
        EXPECT_EQ(g.conditioning.tags, sent.conditioning.tags);
        ASSERT_EQ(g.keyframes.size(), 1u);
        EXPECT_EQ(g.keyframes[0].anchor, KeyframeAnchor::kLast);
        EXPECT_TRUE(same(g.keyframes[0].latents, sent.keyframes[0].latents));
        ASSERT_EQ(g.references.size(), 1u);
        EXPECT_EQ(g.references[0].kind, ReferenceKind::kAudio);
        EXPECT_FALSE(g.references[0].latents.defined());
        EXPECT_TRUE(same(g.references[0].audio_rows, audio_only.audio_rows));
    }
    std::vector<uint8_t> bytes = pack_encoded_inputs(sent);
    bytes.resize(bytes.size() - 10);
    auto cut = unpack_encoded_inputs(bytes);
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.status().message().find("ends 10 bytes early"), std::string::npos)
        << cut.status().message();
}

namespace {

io::DecodedImage pattern(int w, int h, int mul) {
    io::DecodedImage d;
    d.image = io::RgbImage(w, h);
    for (size_t i = 0; i < d.image.pixels.size(); ++i)
        d.image.pixels[i] = static_cast<uint8_t>((i * mul) % 251);
    return d;
}

// One job through the Generator on the tiny checkpoint (the prompt through its text encoder; keyframes and
// references through its VAE encoders and vision tower) under `plan`.
Result<JobReport> run_job(Flow task, const runtime::PlacementPlan& plan) {
    pipeline::JobInput in;
    in.prompt = "a red fox";
    in.size = "64x32";
    in.frames = 107;
    in.num_inference_steps = 3;
    in.seed = 4;
    if (task == Flow::kFl2va) {
        in.first_frame = pattern(64, 32, 13);
        in.last_frame = pattern(64, 32, 7);
    }
    if (task == Flow::kRef2va) {
        pipeline::ReferenceMedia r;
        r.source = "pattern";
        r.image = pattern(48, 40, 11).image;
        in.references.push_back(r);
    }
    in.outputs.latents = std::string(H3_BINARY_DIR) + "/test_parallel_" + task_name(task) + ".safetensors";
    // t2va decodes too (on a group: the video tiles split over the ranks)
    in.outputs.return_media = task == Flow::kT2va;
    H3_ASSIGN_OR_RETURN(auto store, runtime::ModelStore::open(tiny_dir(), plan));
    H3_ASSIGN_OR_RETURN(auto gen, Generator::create(*store));
    // references at a 64-px short edge (the reduced-cost mode), not the released 2048
    const JobBuilder builder(store->info(), {.reference_image_edge = 64, .reference_video_edge = 32});
    H3_ASSIGN_OR_RETURN(GenerationJob job, builder.build(std::move(in)));
    return gen->run(job, {});
}

} // namespace

// On a device group only rank 0 runs the encode stage (conditioner, vision tower, keyframe / reference
// encoders); the others denoise with what it broadcast, and the latents equal the single-rank job's.
TEST(GroupGenerator, Rank0EncodesAndBroadcasts) {
    const runtime::PlacementPlan single =
        runtime::PlacementPlan::per_job(Device::cpu(), runtime::ComputePrecision::kFp32);
    for (Flow task : {Flow::kT2va, Flow::kFl2va, Flow::kRef2va}) {
        SCOPED_TRACE(task_name(task));
        auto base = run_job(task, single);
        ASSERT_TRUE(base.ok()) << base.status().to_string();
        EXPECT_EQ(base->encode_ranks, std::vector<int>{0});
        runtime::PlacementPlan group = single;
        group.parallel.sp = 2;
        group.parallel.tp = task == Flow::kT2va ? 2 : 1;
        auto on_group = run_job(task, group);
        ASSERT_TRUE(on_group.ok()) << on_group.status().to_string();
        EXPECT_EQ(on_group->encode_ranks, std::vector<int>{0}) << "ranks > 0 must not run the encode stage";
        EXPECT_EQ(on_group->work.ranks, group.parallel.world());
        EXPECT_EQ(on_group->conditioning_rows, base->conditioning_rows);
        EXPECT_EQ(on_group->keyframes, task == Flow::kFl2va ? 2 : 0);
        EXPECT_EQ(on_group->references, task == Flow::kRef2va ? 1 : 0);
        if (task != Flow::kT2va) EXPECT_GT(on_group->vision_rows, 0);
        EXPECT_LE(rel_err(on_group->video_latents, base->video_latents), 1e-5);
        EXPECT_LE(rel_err(on_group->audio_latents, base->audio_latents), 1e-5);
        EXPECT_GT(rel_err(on_group->video_latents, on_group->video_noise), 0.05);
        // the frames from the split decode (the latents agree to 1e-5, so the pixels to a rounding step)
        if (task != Flow::kT2va) continue;
        ASSERT_TRUE(on_group->decoded_frames.defined());
        ASSERT_EQ(on_group->decoded_frames.shape(), base->decoded_frames.shape());
        const uint8_t* a = on_group->decoded_frames.data_as<const uint8_t>();
        const uint8_t* b = base->decoded_frames.data_as<const uint8_t>();
        int worst = 0;
        for (int64_t i = 0; i < base->decoded_frames.numel(); ++i)
            worst = std::max(worst, std::abs(a[i] - b[i]));
        EXPECT_LE(worst, 1);
        EXPECT_EQ(on_group->frames, base->frames);
    }
}

// The tiled video decode split over a device group: each rank decodes its share of every clip's tiles, rank
// 0 blends the gathered tiles. The sample (and the RGB8 frames) equal the single-rank decode byte for byte;
// the other ranks return nothing. 48x96 pixels in 32-px tiles: 2 × 5 tiles per clip, over 3 ranks 3/3/4.
TEST(GroupDecode, TileSplitEqualsTheSingleRankDecodeBitForBit) {
    const model::VideoVaeConfig config = model::tiny_video_vae_config({});
    auto vae = model::random_video_vae(ops::Context::cpu(), config, DType::kF32, 17);
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    const Tensor latents = random_tensor(Shape{1, config.latent_channels, 12, 3, 6}, 31);
    model::VideoDecodeOptions o;
    o.tile = 32;
    o.min_overlap = 16;
    auto single = model::decode_video_sample(ops::Context::cpu(), *vae, latents, o);
    ASSERT_TRUE(single.ok()) << single.status().to_string();
    for (int ranks : {2, 3}) {
        SCOPED_TRACE(std::to_string(ranks) + " ranks");
        auto group = runtime::DeviceGroup::create(plan(ranks, 1), ops::Context::cpu());
        ASSERT_TRUE(group.ok()) << group.status().to_string();
        std::vector<Tensor> got(static_cast<size_t>(ranks));
        const Status s = (*group)->run_spmd([&](runtime::DeviceGroup::Rank& r) -> Status {
            model::VideoVae mine = *vae;
            mine.tables.reset(); // each rank its own buffers
            model::VideoDecodeOptions ro = o;
            ro.group = r.world.get();
            H3_ASSIGN_OR_RETURN(got[static_cast<size_t>(r.local)],
                                model::decode_video_sample(r.ctx, mine, latents, ro));
            return ok_status();
        });
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_TRUE(got[0].defined());
        ASSERT_EQ(got[0].shape(), single->shape());
        EXPECT_EQ(std::memcmp(got[0].data(), single->data(), single->nbytes()), 0);
        for (int r = 1; r < ranks; ++r) EXPECT_FALSE(got[static_cast<size_t>(r)].defined()) << "rank " << r;
    }
    // The pipeline's path (frames on rank 0) through the same group split.
    auto group = runtime::DeviceGroup::create(plan(3, 1), ops::Context::cpu());
    ASSERT_TRUE(group.ok());
    auto frames = decode_video_on_group(**group, *vae, latents);
    ASSERT_TRUE(frames.ok()) << frames.status().to_string();
    auto one = decode_video_frames(ops::Context::cpu(), *vae, latents);
    ASSERT_TRUE(one.ok());
    ASSERT_EQ(frames->shape(), one->shape());
    EXPECT_EQ(std::memcmp(frames->data(), one->data(), one->nbytes()), 0);
}

// On a GPU (scripts/device_check.sh): the NCCL paths of the encode broadcast (bytes through a device buffer)
// and of the tile-split decode (tiles gathered in device memory), at world size 1 — the decode equals the
// plain one bit for bit. Skipped without NCCL or a CUDA device.
TEST(GroupNccl, BroadcastAndTileDecodeAtWorldSizeOne) {
    if (!ops::nccl_available()) GTEST_SKIP() << "built without NCCL";
    auto session = runtime::DeviceSession::open("cuda:0");
    if (!session.ok()) GTEST_SKIP() << "no CUDA device: " << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto id = ops::nccl_unique_id();
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    auto comm = ops::make_nccl_communicator(*id, 0, 1, ctx.device.index);
    ASSERT_TRUE(comm.ok()) << comm.status().to_string();
    EncodedInputs in;
    in.conditioning.embeddings = random_tensor(Shape{3, 8}, 41);
    in.conditioning.tags.assign(3, kTagText);
    const Status b = broadcast_encoded_inputs(ctx, **comm, in);
    ASSERT_TRUE(b.ok()) << b.to_string();
    const model::VideoVaeConfig config = model::tiny_video_vae_config({});
    auto vae = model::random_video_vae(ctx, config, DType::kF32, 17);
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    const Tensor latents = random_tensor(Shape{1, config.latent_channels, 7, 3, 6}, 31);
    model::VideoDecodeOptions o;
    o.tile = 32;
    o.min_overlap = 16;
    o.tile_batch = 1;
    auto plain = model::decode_video_sample(ctx, *vae, latents, o);
    ASSERT_TRUE(plain.ok()) << plain.status().to_string();
    o.group = comm->get();
    auto split = model::decode_video_sample(ctx, *vae, latents, o);
    ASSERT_TRUE(split.ok()) << split.status().to_string();
    ASSERT_EQ(split->shape(), plain->shape());
    EXPECT_EQ(std::memcmp(split->data(), plain->data(), plain->nbytes()), 0);
}

// The communication lane on CUDA (issue #46's overlap): at NCCL world size 1 the forced Ulysses path with its
// heads in 2 groups (their all-to-alls on the lane's stream, ordered by events) and the forced ring path
// (its gathers on the lane) give the plain path's latents — a missing wait between the streams would read
// buffers the lane has not filled yet.
TEST(GroupNccl, CommunicationLaneEqualsThePlainPathAtWorldSizeOne) {
    if (!ops::nccl_available()) GTEST_SKIP() << "built without NCCL";
    auto session = runtime::DeviceSession::open("cuda:0");
    if (!session.ok()) GTEST_SKIP() << "no CUDA device: " << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto ck = model::open_dit_checkpoint(tiny_dir() + "/transformer");
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto dit =
        model::DitModel::load(*ck, {.device = ctx.device, .precision = model::DitPrecision::kFp32}, ctx);
    ASSERT_TRUE(dit.ok()) << dit.status().to_string();
    Case c = make_case(Flow::kT2va, 7);
    c.rq.steps = 3;
    auto plain = generate_latents(**dit, c.cond, c.rq);
    ASSERT_TRUE(plain.ok()) << plain.status().to_string();
    struct Path {
        bool ring;
        int groups;
    };
    for (Path path : {Path{false, 1}, Path{false, 2}, Path{true, 0}, Path{true, 1}}) {
        SCOPED_TRACE(std::string(path.ring ? "ulysses+ring" : "ulysses") + " overlap groups " +
                     std::to_string(path.groups));
        runtime::ParallelPlan p;
        p.force_sequence_path = true;
        p.force_ring_path = path.ring;
        p.overlap_groups = path.groups;
        auto group = runtime::DeviceGroup::create(p, ctx);
        ASSERT_TRUE(group.ok()) << group.status().to_string();
        DenoiseOptions o;
        o.parallel = &(*group)->rank(0).dit;
        auto out = generate_latents(**dit, c.cond, c.rq, o);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        EXPECT_LE(rel_err(out->video_latents, plain->video_latents), 1e-5);
        EXPECT_LE(rel_err(out->audio_latents, plain->audio_latents), 1e-5);
    }
}
