// No first-step penalty (issue #45) on the tiny checkpoint (CPU): the one-time work counters
// (core/one_time_work.h) per forward in the job metrics; the DiT's workspace kept between jobs
// (model/dit/dit_workspace_keeper.h, EngineOptions::keep_dit_workspace) so the second job's first forward
// allocates nothing; Engine::warm_up, after which the first job's first forward allocates nothing and whose
// job gives the same latents bit for bit as without it; warm-up errors that name the field and leave the
// engine serving; the forwards a warm-up runs; the GEMM tuning table that keeps the tuner's choices across
// processes (its file round trip, another device's file, a damaged one).
#include "core/one_time_work.h"
#include "engine/engine_impl.h"
#include "model/dit/dit_model.h"
#include "ops/gemm_tuning_table.h"
#include "pipeline/denoise.h"
#include "tiny_checkpoint_once.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace h3;
using json = nlohmann::json;

namespace {

const fs::path kWork = fs::path(H3_BINARY_DIR) / "test_warm_up";

const std::string& tiny() {
    static const std::string dir = test::tiny_checkpoint_once(kWork / "tiny", 3);
    return dir;
}

// A server-like engine on the CPU (the DiT stays loaded between jobs).
std::unique_ptr<Engine> open_engine(bool keep_workspace) {
    EngineOptions eo;
    eo.checkpoint = tiny();
    eo.device = "cpu";
    eo.dtype = "fp32";
    eo.keep_loaded = true;
    eo.keep_dit_workspace = keep_workspace;
    auto e = Engine::open(eo);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    return e.ok() ? std::move(e).value() : nullptr;
}

pipeline::JobInput job_input(const std::string& latents) {
    pipeline::JobInput in;
    in.prompt = "a red fox runs through snow";
    in.size = "64x32";
    in.frames = 107;
    in.num_inference_steps = 4;
    in.seed = 5;
    in.outputs.latents = latents;
    return in;
}

JobRequest job_request() {
    JobRequest r;
    r.prompt = "a red fox runs through snow";
    r.size = "64x32";
    r.frames = 107;
    r.num_inference_steps = 4;
    r.seed = 5;
    return r;
}

pipeline::JobReport run_job(Engine& e, const std::string& name) {
    Engine::Impl& impl = e.impl();
    auto job = impl.build(job_input((kWork / (name + ".safetensors")).string()));
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    auto r = impl.run(*job, {});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : pipeline::JobReport{};
}

json first_forward(const pipeline::JobReport& r) {
    return r.metrics(pipeline::Task::kT2va).value("first_forward", json());
}

bool bit_equal(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && a.dtype() == b.dtype() &&
           std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

} // namespace

TEST(OneTimeWork, CountersAddAndSubtractAndTallyAllocations) {
    OneTimeCounter counter;
    {
        const OneTimeScope scope(&counter);
        note_one_time({.gemm_tunings = 2, .gemm_tuning_seconds = 0.5});
        AllocationTally tally;
        auto a = allocate_host(1000);
        auto b = allocate(24, Device::cpu());
        ASSERT_TRUE(a.ok() && b.ok());
        EXPECT_EQ(tally.count(), 2);
        EXPECT_EQ(tally.bytes(), 1024u);
        tally.note_as_workspace();
        EXPECT_EQ(tally.count(), 0);
        note_workspace_allocation(8);
    }
    const OneTimeWork w = counter.total();
    EXPECT_EQ(w.gemm_tunings, 2);
    EXPECT_EQ(w.workspace_allocations, 3);
    EXPECT_EQ(w.workspace_bytes, 1032u);
    EXPECT_FALSE(w.none());
    EXPECT_TRUE((w - w).none());
    note_workspace_allocation(8); // outside every scope: nothing is counted
    EXPECT_EQ(counter.total().workspace_allocations, 3);
}

TEST(GemmTuningTable, ChoicesSurviveTheProcessForTheSameIdentityOnly) {
    fs::create_directories(kWork);
    const std::string path = (kWork / "tuning.txt").string();
    fs::remove(path);
    const ops::GemmTuningTable::Key key = {38247, 15360, 5120, 14, 14, -1, 0, 256, 256, 256, 0};
    {
        ops::GemmTuningTable t(path, "H100, cc 9.0, cuBLASLt 130000");
        EXPECT_EQ(t.size(), 0u); // no file yet
        t.record("gemm", key, {.chosen = 3, .candidates = 8});
        t.record("fp8", {1, 2, 3}, {.chosen = 0, .candidates = 5});
    }
    ops::GemmTuningTable again(path, "H100, cc 9.0, cuBLASLt 130000"); // a later process
    ASSERT_EQ(again.size(), 2u);
    const auto c = again.find("gemm", key);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->chosen, 3);
    EXPECT_EQ(c->candidates, 8);
    EXPECT_FALSE(again.find("fp8", key).has_value()); // families apart
    // a problem of nearly as many rows (a prompt a few tokens longer) takes the nearest one's choice; one of
    // some 1/8 more rows, or with another value, does not
    ops::GemmTuningTable::Key near = key, far = key, other_n = key;
    near[0] += 300;
    far[0] += 38247 / 8; // 1/16 of the larger rows is still less
    other_n[1] = 5120;
    ASSERT_TRUE(again.find_near("gemm", near).has_value());
    EXPECT_EQ(again.find_near("gemm", near)->chosen, 3);
    EXPECT_FALSE(again.find("gemm", near).has_value());
    EXPECT_FALSE(again.find_near("gemm", far).has_value());
    EXPECT_FALSE(again.find_near("gemm", other_n).has_value());
    ops::GemmTuningTable memory("", "H100, cc 9.0, cuBLASLt 130000"); // no file: this process only
    memory.record("gemm", key, {.chosen = 1, .candidates = 8});
    EXPECT_EQ(memory.find("gemm", key)->chosen, 1);
    ops::GemmTuningTable other(path, "H200, cc 9.0, cuBLASLt 130000"); // another device: nothing reused
    EXPECT_EQ(other.size(), 0u);
    std::ofstream(path, std::ios::app) << "gemm 9 4 1 2 3\n"; // chosen past the candidates: damaged
    ops::GemmTuningTable damaged(path, "H100, cc 9.0, cuBLASLt 130000");
    EXPECT_EQ(damaged.size(), 0u);
}

TEST(DitWorkspaceKeeper, OneRequestAtATimeGetsTheKeptWorkspace) {
    model::DitWorkspaceKeeper keeper;
    std::shared_ptr<model::DitWorkspace> first = keeper.take();
    model::DitWorkspace* kept = first.get();
    std::shared_ptr<model::DitWorkspace> concurrent = keeper.take(); // the kept one is busy
    EXPECT_NE(concurrent.get(), kept);
    EXPECT_EQ(keeper.busy(), 1u);
    first.reset();
    concurrent.reset();
    std::shared_ptr<model::DitWorkspace> again = keeper.take(); // free again: handed out once more
    EXPECT_EQ(again.get(), kept);
    EXPECT_EQ(keeper.reused(), 1u);
    again.reset();
    keeper.release();
    EXPECT_EQ(keeper.take().use_count(), 2); // a new kept one (the keeper's reference and ours)
}

TEST(WarmUpSteps, FirstForwardAndTheFirstSparseOne) {
    model::AttentionChoice dense;
    EXPECT_EQ(pipeline::warm_up_steps(dense, 4), (std::vector<int>{0}));
    auto vsa = model::parse_attention_choice("vsa:sparsity=0.9,dense_first_n_steps=2");
    ASSERT_TRUE(vsa.ok());
    EXPECT_EQ(pipeline::warm_up_steps(*vsa, 4), (std::vector<int>{0, 2}));
    EXPECT_EQ(pipeline::warm_up_steps(*vsa, 2), (std::vector<int>{0})); // no sparse step in the schedule
    auto all_sparse = model::parse_attention_choice("vsa:sparsity=0.9");
    ASSERT_TRUE(all_sparse.ok());
    EXPECT_EQ(pipeline::warm_up_steps(*all_sparse, 4), (std::vector<int>{0}));
}

// The first job sizes the workspace in its first forward and no later one; with the workspace kept, the
// second job's first forward allocates nothing; without it (as before), it allocates again.
TEST(WarmUp, KeptWorkspaceLeavesTheSecondJobsFirstForwardNothingToAllocate) {
    for (const bool keep : {true, false}) {
        SCOPED_TRACE(keep ? "kept" : "per job");
        auto e = open_engine(keep);
        ASSERT_TRUE(e);
        const pipeline::JobReport one = run_job(*e, "one");
        ASSERT_EQ(one.work.steps.size(), 3u);
        EXPECT_GT(one.work.steps[0].one_time.workspace_allocations, 0);
        EXPECT_GT(one.work.steps[0].one_time.workspace_bytes, 0u);
        EXPECT_TRUE(one.work.steps[1].one_time.none()) << first_forward(one).dump();
        EXPECT_TRUE(one.work.steps[2].one_time.none());
        EXPECT_EQ(first_forward(one)["workspace_allocations"],
                  one.work.steps[0].one_time.workspace_allocations);
        const pipeline::JobReport two = run_job(*e, "two");
        ASSERT_EQ(two.work.steps.size(), 3u);
        if (keep) {
            EXPECT_TRUE(two.work.steps[0].one_time.none()) << first_forward(two).dump();
            EXPECT_EQ(first_forward(two)["workspace_allocations"], 0);
            EXPECT_EQ(first_forward(two)["gemm_tunings"], 0);
        } else {
            EXPECT_EQ(two.work.steps[0].one_time.workspace_allocations,
                      one.work.steps[0].one_time.workspace_allocations);
        }
        EXPECT_TRUE(bit_equal(one.video_latents, two.video_latents)); // the kept buffers change nothing
        EXPECT_TRUE(bit_equal(one.audio_latents, two.audio_latents));
    }
}

// Engine::warm_up before the first job: the warm-up's forward does the one-time work, the job's first forward
// none, and the job's latents are those of an engine that did not warm up, bit for bit.
TEST(WarmUp, WarmUpTakesTheFirstJobsOneTimeWorkAndChangesNoLatent) {
    auto cold = open_engine(true);
    ASSERT_TRUE(cold);
    const pipeline::JobReport reference = run_job(*cold, "cold");
    EXPECT_GT(reference.work.steps[0].one_time.workspace_allocations, 0);

    auto warm = open_engine(true);
    ASSERT_TRUE(warm);
    JobRequest request = job_request();
    request.output = (kWork / "never_written.mp4").string(); // a warm-up writes nothing
    auto w = warm->warm_up(request);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_FALSE(fs::exists(request.output));
    EXPECT_EQ(w->step_seconds.size(), 1u); // dense attention: the first forward only
    EXPECT_GT(w->seconds, 0.0);
    const json wm = json::parse(w->metrics_json);
    EXPECT_GT(wm["first_forward"]["workspace_allocations"].get<int64_t>(), 0) << wm.dump();
    EXPECT_GT(wm["decode_seconds"].get<double>(), 0.0) << wm.dump(); // media jobs decode: so does it

    JobRequest latents_only = job_request();
    latents_only.save_latents = (kWork / "never_written.safetensors").string();
    auto wl = warm->warm_up(latents_only);
    ASSERT_TRUE(wl.ok()) << wl.status().to_string();
    EXPECT_FALSE(fs::exists(latents_only.save_latents));
    EXPECT_EQ(json::parse(wl->metrics_json)["decode_seconds"].get<double>(), 0.0); // latents only: no decode

    const pipeline::JobReport job = run_job(*warm, "warm");
    ASSERT_EQ(job.work.steps.size(), 3u);
    EXPECT_TRUE(job.work.steps[0].one_time.none()) << first_forward(job).dump();
    EXPECT_TRUE(bit_equal(job.video_latents, reference.video_latents));
    EXPECT_TRUE(bit_equal(job.audio_latents, reference.audio_latents));
    EXPECT_TRUE(bit_equal(job.video_noise, reference.video_noise));
}

// VSA with a dense first step (FastH3's gated blocks): the warm-up runs the first forward and the first
// sparse one, so neither the job's first forward nor its first sparse one allocates anything (the VSA
// buffers — pooled rows, tile scores, key-tile lists, the gate — were made by the warm-up's sparse forward).
TEST(WarmUp, VsaWarmUpCoversTheFirstSparseStep) {
    EngineOptions eo;
    eo.checkpoint = test::tiny_checkpoint_once(kWork / "fasth3", 3, model::TinyVariant::kFastH3);
    eo.device = "cpu";
    eo.dtype = "fp32";
    eo.keep_loaded = true;
    auto e = Engine::open(eo);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    JobRequest request = job_request();
    request.attention = "vsa:sparsity=0.5,dense_first_n_steps=1";
    request.save_latents = (kWork / "vsa_never_written.safetensors").string(); // latents only: no decode
    auto w = (*e)->warm_up(request);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    ASSERT_EQ(w->step_seconds.size(), 2u); // step 0 (dense) and step 1 (the first sparse one)
    const json wm = json::parse(w->metrics_json);
    EXPECT_GT(wm["per_step"][1]["one_time"]["workspace_allocations"].get<int64_t>(), 0) << wm.dump();

    pipeline::JobInput in = job_input((kWork / "vsa.safetensors").string());
    in.attention = "vsa:sparsity=0.5,dense_first_n_steps=1";
    auto job = (*e)->impl().build(std::move(in));
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ASSERT_TRUE(job->attention.is_vsa());
    auto r = (*e)->impl().run(*job, {});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->work.steps.size(), 3u);
    for (const cache::StepRecord& s : r->work.steps)
        EXPECT_TRUE(s.one_time.none())
            << "step " << s.step << ": " << cache::one_time_json(s.one_time).dump();
}

// A warm-up that cannot build or is cancelled says so naming the field; the engine runs jobs afterwards.
TEST(WarmUp, ErrorsNameTheFieldAndLeaveTheEngineServing) {
    auto e = open_engine(true);
    ASSERT_TRUE(e);
    JobRequest bad = job_request();
    bad.size = "7x3";
    auto w = e->warm_up(bad);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().field(), "size") << w.status().to_string();
    EXPECT_EQ(w.status().message().find("--"), std::string::npos) << w.status().message(); // no CLI flag

    std::atomic<bool> cancel{true};
    auto c = e->warm_up(job_request(), {.cancel = &cancel});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), ErrorCode::kCancelled) << c.status().to_string();

    const pipeline::JobReport after = run_job(*e, "after_errors");
    EXPECT_EQ(after.work.steps.size(), 3u);
}
