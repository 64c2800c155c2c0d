// The DiT forward on the CPU against goldens from tools/reference (PyTorch written from the spec).
//
// Tolerances. fp32: the C++ forward and the reference differ only in summation order, so outputs agree to
// ~1e-6 relative; we require max |Δ| ≤ 1e-4 · max|ref| per tensor (the 1e-4 relative bound).
// bf16: both sides round at the same points (the reference's eager-PyTorch contract, tools/reference/
// h3_dit.py docstring), but a GEMM whose fp32 accumulation order differs can land on the other side of a
// bf16 rounding boundary; one such flip moves a value by 1 bf16 ulp (2^-8 relative) and it propagates. The
// reference's own bf16-vs-bf16-tensor check saw 1.4e-2 max abs for that reason. We require
// max |Δ| ≤ 5e-2 · max(1, max|ref|) and relative RMS ≤ 1e-2 — about ten times tighter than fp32-vs-bf16
// (0.02–0.04 abs, 8.8e-3 rel-RMS on these configs), so a wrong rounding point or a wrong formula fails.
#include "core/cuda_api.h"
#include "io/safetensors.h"
#include "model/dit/dit_model.h"
#include "ops/sampling.h"
#include "pipeline/schedule.h"

#include "golden_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

using namespace h3;
using namespace h3::model;

namespace {

std::string golden_dir(const std::string& cfg) {
    return std::string(H3_SOURCE_DIR) + "/tests/data/dit/" + cfg;
}

using testing_support::compare;
using testing_support::Diff;

struct ForwardRun {
    DitOutputs out;
    std::map<std::string, Tensor> intermediates;
};

ForwardRun run(const std::string& cfg, const std::string& layout, DitPrecision prec) {
    ForwardRun r;
    auto ckpt = open_dit_checkpoint(golden_dir(cfg) + "/" + layout);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    if (!ckpt.ok()) return r;
    auto in = DitInputs::from_file(golden_dir(cfg) + "/inputs.safetensors");
    EXPECT_TRUE(in.ok()) << in.status().to_string();
    auto packed = pack_inputs(*in, ckpt->config);
    EXPECT_TRUE(packed.ok()) << packed.status().to_string();
    auto m = DitModel::load(*ckpt, {.device = Device::cpu(), .precision = prec}, ops::Context::cpu());
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    if (!m.ok() || !packed.ok()) return r;
    DitForwardOptions o;
    o.hook.wants = [](const std::string&) { return true; };
    o.hook.record = [&](const std::string& n, const Tensor& t) { r.intermediates[n] = *t.to(Device::cpu()); };
    o.ffn_chunk_bytes = 1024; // several FFN row chunks even on tiny inputs
    auto out = (*m)->forward(*packed, nullptr, o);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (out.ok()) r.out = *out;
    return r;
}

void check_against_golden(const std::string& cfg, const std::string& layout, DitPrecision prec) {
    const bool fp32 = prec == DitPrecision::kFp32;
    auto golden = io::SafetensorsFile::open(
        golden_dir(cfg) + (fp32 ? "/outputs_fp32.safetensors" : "/outputs_bf16.safetensors"));
    ASSERT_TRUE(golden.ok()) << golden.status().to_string();
    ForwardRun r = run(cfg, layout, prec);
    ASSERT_TRUE(r.out.sample.defined());
    int compared = 0;
    for (const auto& info : golden->tensors()) {
        Tensor want = *golden->tensor(info.name);
        Tensor got;
        if (info.name == "sample")
            got = r.out.sample;
        else if (info.name == "audio_sample")
            got = r.out.audio_sample;
        else if (r.intermediates.count(info.name))
            got = r.intermediates[info.name];
        else
            continue;
        ++compared;
        ASSERT_EQ(got.numel(), want.numel()) << info.name;
        Diff d = compare(got, want);
        if (fp32) {
            EXPECT_LE(d.max_abs, 1e-4 * std::max(1.0, d.ref_max)) << cfg << "/" << layout << " " << info.name;
        } else {
            EXPECT_LE(d.max_abs, 5e-2 * std::max(1.0, d.ref_max)) << cfg << "/" << layout << " " << info.name;
            EXPECT_LE(d.rel_rms, 1e-2) << cfg << "/" << layout << " " << info.name;
        }
    }
    // sample, audio_sample, temb, refiner_out, final_norm_out and 4 per block at least
    EXPECT_GE(compared, 7) << "too few golden tensors matched by name";
}

// pipeline::euler_update over a host tensor (the loop's reference step).
void pipeline_euler_reference(Tensor& x, const Tensor& v, float t, float sigma, float sigma_next) {
    pipeline::euler_update(x.data_as<float>(), v.data_as<const float>(), static_cast<size_t>(x.numel()), t,
                           sigma, sigma_next);
}

bool have_goldens() {
    return std::filesystem::exists(golden_dir("A") + "/inputs.safetensors");
}

} // namespace

class DitGolden : public ::testing::TestWithParam<std::tuple<std::string, std::string, DitPrecision>> {};

TEST_P(DitGolden, MatchesReference) {
    if (!have_goldens()) GTEST_SKIP() << "no goldens under tests/data/dit";
    auto [cfg, layout, prec] = GetParam();
    check_against_golden(cfg, layout, prec);
}

INSTANTIATE_TEST_SUITE_P(Configs, DitGolden,
                         ::testing::Combine(::testing::Values("A", "B"),
                                            ::testing::Values("diffusers", "original"),
                                            ::testing::Values(DitPrecision::kFp32, DitPrecision::kBf16)),
                         [](const auto& info) {
                             return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" +
                                    precision_name(std::get<2>(info.param));
                         });

TEST(Dit, BothCheckpointFormatsGiveIdenticalOutputs) {
    if (!have_goldens()) GTEST_SKIP();
    for (auto prec : {DitPrecision::kFp32, DitPrecision::kBf16}) {
        ForwardRun a = run("B", "diffusers", prec), b = run("B", "original", prec);
        ASSERT_TRUE(a.out.sample.defined() && b.out.sample.defined());
        EXPECT_EQ(compare(a.out.sample, b.out.sample).max_abs, 0.0);
        EXPECT_EQ(compare(a.out.audio_sample, b.out.audio_sample).max_abs, 0.0);
    }
}

TEST(Dit, PrecomputedAdalnTablesGiveTheSameOutput) {
    if (!have_goldens()) GTEST_SKIP();
    auto ckpt = open_dit_checkpoint(golden_dir("B") + "/diffusers");
    ASSERT_TRUE(ckpt.ok());
    auto in = DitInputs::from_file(golden_dir("B") + "/inputs.safetensors");
    auto packed = pack_inputs(*in, ckpt->config);
    auto m = DitModel::load(*ckpt, {.precision = DitPrecision::kFp32}, ops::Context::cpu());
    ASSERT_TRUE(m.ok());
    // A schedule-wide table with extra timesteps in another order must serve this forward unchanged.
    std::vector<float> schedule = {0.9f, packed->timesteps[2], 0.1f, packed->timesteps[0],
                                   packed->timesteps[1]};
    auto tables = (*m)->compute_adaln_tables(schedule);
    ASSERT_TRUE(tables.ok());
    auto a = (*m)->forward(*packed, &*tables);
    auto b = (*m)->forward(*packed, nullptr);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(compare(a->sample, b->sample).max_abs, 0.0);
    // A request state prepared once serves every step unchanged (refiner and RoPE hoisted).
    auto state = (*m)->prepare_request(*packed);
    ASSERT_TRUE(state.ok());
    auto s1 = (*m)->forward(*packed, &*tables, {}, &*state);
    ASSERT_TRUE(s1.ok());
    EXPECT_EQ(compare(s1->sample, b->sample).max_abs, 0.0);
    DitPackedInputs step2 = *packed; // another step: other timesteps, other latents, same layout
    std::swap(step2.timesteps[0], step2.timesteps[1]);
    step2.video = *packed->video.to(Device::cpu());
    step2.video.data_as<float>()[0] += 0.5f;
    auto s2a = (*m)->forward(step2, &*tables, {}, &*state);
    auto s2b = (*m)->forward(step2, nullptr);
    ASSERT_TRUE(s2a.ok() && s2b.ok());
    EXPECT_EQ(compare(s2a->sample, s2b->sample).max_abs, 0.0);
    EXPECT_GT(compare(s2a->sample, s1->sample).max_abs, 0.0);
    // A table missing a timestep is an error, not a crash.
    auto partial = (*m)->compute_adaln_tables({0.5f});
    auto c = (*m)->forward(*packed, &*partial);
    EXPECT_FALSE(c.ok());
}

// The request workspace: every forward over one state reuses it; a forward-only workspace, device-resident
// outputs and inputs already on the device all give the same outputs, and the loop's Euler step as an op
// matches the host one.
void check_workspace_paths(const ops::Context& ctx, Device device, DitPrecision prec) {
    auto ckpt = open_dit_checkpoint(golden_dir("B") + "/diffusers");
    ASSERT_TRUE(ckpt.ok());
    auto in = DitInputs::from_file(golden_dir("B") + "/inputs.safetensors");
    auto packed = pack_inputs(*in, ckpt->config);
    ASSERT_TRUE(packed.ok());
    auto m = DitModel::load(*ckpt, {.device = device, .precision = prec}, ctx);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto tables = (*m)->compute_adaln_tables(packed->timesteps);
    auto state = (*m)->prepare_request(*packed);
    ASSERT_TRUE(tables.ok() && state.ok());
    auto host_copy = [](const Tensor& t) { return *t.to(Device::cpu()); };
    auto first = (*m)->forward(*packed, &*tables, {}, &*state);
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    EXPECT_TRUE(first->sample.device().is_cpu());
    const uint64_t a0 = device_memory_stats().allocations;
    auto again = (*m)->forward(*packed, &*tables, {}, &*state);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(device_memory_stats().allocations, a0)
        << "a forward over a prepared state allocated device memory";
    EXPECT_EQ(compare(again->sample, first->sample).max_abs, 0.0);
    DitForwardOptions fresh;
    fresh.reuse_workspace = false;
    auto once = (*m)->forward(*packed, &*tables, fresh, &*state);
    ASSERT_TRUE(once.ok());
    EXPECT_EQ(compare(once->sample, first->sample).max_abs, 0.0);
    EXPECT_EQ(compare(once->audio_sample, first->audio_sample).max_abs, 0.0);
    // Outputs left on the device, and the next forward fed from device-resident latents.
    DitForwardOptions on_dev;
    on_dev.outputs_on_device = true;
    auto dev_out = (*m)->forward(*packed, &*tables, on_dev, &*state);
    ASSERT_TRUE(dev_out.ok());
    EXPECT_EQ(dev_out->sample.device(), device);
    EXPECT_EQ(compare(host_copy(dev_out->sample), first->sample).max_abs, 0.0);
    EXPECT_EQ(compare(host_copy(dev_out->audio_sample), first->audio_sample).max_abs, 0.0);
    DitPackedInputs resident = *packed;
    resident.video = *packed->video.to(device);
    resident.audio = *packed->audio.to(device);
    auto from_dev = (*m)->forward(resident, &*tables, {}, &*state);
    ASSERT_TRUE(from_dev.ok()) << from_dev.status().to_string();
    EXPECT_EQ(compare(from_dev->sample, first->sample).max_abs, 0.0);
    // One Euler step on the device-resident rows == the host loop's step, bit for bit.
    Tensor x_host = host_copy(packed->video);
    pipeline_euler_reference(x_host, first->sample, 0.7f, 0.7f, 0.55f);
    Tensor x_dev = resident.video;
    ASSERT_TRUE(
        ops::euler_update(ctx, {.timestep = 0.7f, .sigma = 0.7f, .sigma_next = 0.55f}, x_dev, dev_out->sample)
            .ok());
    EXPECT_EQ(compare(host_copy(x_dev), x_host).max_abs, 0.0);
}

TEST(Dit, RequestWorkspaceServesEveryForward) {
    if (!have_goldens()) GTEST_SKIP();
    check_workspace_paths(ops::Context::cpu(), Device::cpu(), DitPrecision::kFp32);
}

TEST(Dit, CancellationStopsBetweenBlocks) {
    if (!have_goldens()) GTEST_SKIP();
    auto ckpt = open_dit_checkpoint(golden_dir("A") + "/diffusers");
    auto in = DitInputs::from_file(golden_dir("A") + "/inputs.safetensors");
    auto packed = pack_inputs(*in, ckpt->config);
    auto m = DitModel::load(*ckpt, {}, ops::Context::cpu());
    std::atomic<bool> cancel{true};
    DitForwardOptions o;
    o.cancel = &cancel;
    auto r = (*m)->forward(*packed, nullptr, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kCancelled);
}

TEST(Dit, BadInputsAreReportedByName) {
    if (!have_goldens()) GTEST_SKIP();
    auto ckpt = open_dit_checkpoint(golden_dir("A") + "/diffusers");
    auto in = DitInputs::from_file(golden_dir("A") + "/inputs.safetensors");
    ASSERT_TRUE(in.ok());
    DitInputs bad = *in;
    bad.video_indices = *in->video_indices.to(Device::cpu());
    bad.video_indices.set({0}, 1000);
    auto r = pack_inputs(bad, ckpt->config);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("video_indices"), std::string::npos) << r.status().message();
    bad = *in;
    bad.token_tags = *in->token_tags.to(Device::cpu());
    bad.token_tags.set({0}, 5);
    r = pack_inputs(bad, ckpt->config);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("token_tags"), std::string::npos);
    bad = *in;
    bad.hidden_states = Tensor::host(Shape{in->hidden_states.dim(0), 7}, DType::kF32);
    r = pack_inputs(bad, ckpt->config);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("hidden_states"), std::string::npos);
}

// ---- CUDA parity (runs where a GPU is present; skipped elsewhere)
// -------------------------------------------
#include "cli/device_setup.h"

namespace {
double cosine(const Tensor& a, const Tensor& b) {
    auto x = to_f32_vector(a), y = to_f32_vector(b);
    double dot = 0, nx = 0, ny = 0;
    for (size_t i = 0; i < x->size(); ++i) {
        dot += double((*x)[i]) * (*y)[i];
        nx += double((*x)[i]) * (*x)[i];
        ny += double((*y)[i]) * (*y)[i];
    }
    return dot / std::sqrt(nx * ny + 1e-300);
}
} // namespace

// bf16 on CUDA against the bf16 golden: cosine similarity ≥ 0.9999 on the final outputs (the bar);
// every intermediate's relative RMS error is printed (the per-block report). fp32 on CUDA (no TF32) against
// the fp32 golden: the same 1e-4 bound as the CPU.
TEST(DitCuda, MatchesReference) {
    if (!have_goldens()) GTEST_SKIP();
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = h3::cli::DeviceSession::open("cuda:0");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    for (const char* cfg : {"A", "B"})
        for (auto prec : {DitPrecision::kBf16, DitPrecision::kFp32}) {
            const bool fp32 = prec == DitPrecision::kFp32;
            auto ckpt = open_dit_checkpoint(golden_dir(cfg) + "/original");
            auto in = DitInputs::from_file(golden_dir(cfg) + "/inputs.safetensors");
            auto packed = pack_inputs(*in, ckpt->config);
            auto m =
                DitModel::load(*ckpt, {.device = Device::cuda(0), .precision = prec}, (*session)->context());
            ASSERT_TRUE(m.ok()) << m.status().to_string();
            std::map<std::string, Tensor> rec;
            DitForwardOptions o;
            o.hook.wants = [](const std::string&) { return true; };
            o.hook.record = [&](const std::string& n, const Tensor& t) { rec[n] = *t.to(Device::cpu()); };
            auto out = (*m)->forward(*packed, nullptr, o);
            ASSERT_TRUE(out.ok()) << out.status().to_string();
            auto golden = io::SafetensorsFile::open(
                golden_dir(cfg) + (fp32 ? "/outputs_fp32.safetensors" : "/outputs_bf16.safetensors"));
            ASSERT_TRUE(golden.ok());
            for (const auto& info : golden->tensors()) {
                Tensor want = *golden->tensor(info.name);
                Tensor got = info.name == "sample"         ? out->sample
                             : info.name == "audio_sample" ? out->audio_sample
                             : rec.count(info.name)        ? rec[info.name]
                                                           : Tensor();
                if (!got.defined()) continue;
                Diff d = compare(got, want);
                double cs = cosine(got, want);
                std::printf("cuda %s %s %-22s rel_rms %.3e max_abs %.3e cosine %.7f\n", cfg,
                            precision_name(prec), info.name.c_str(), d.rel_rms, d.max_abs, cs);
                if (fp32) {
                    EXPECT_LE(d.max_abs, 1e-4 * std::max(1.0, d.ref_max)) << cfg << " " << info.name;
                } else if (info.name == "sample" || info.name == "audio_sample") {
                    EXPECT_GE(cs, 0.9999) << cfg << " " << info.name;
                }
            }
        }
}

TEST(DitCuda, RequestWorkspaceServesEveryForward) {
    if (!have_goldens()) GTEST_SKIP();
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = h3::cli::DeviceSession::open("cuda:0");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    for (auto prec : {DitPrecision::kBf16, DitPrecision::kFp32})
        check_workspace_paths((*session)->context(), Device::cuda(0), prec);
}

// Recorded blocks (model/dit/dit_graphs.h): over one request state, forwards 2..n replay each block's
// recording. Four steps with other latents and timesteps give, bit for bit, what the same steps give with
// every op launched from the host; every block is recorded once and none fails; a forward that cannot use
// recordings (a hook) still matches.
TEST(DitCuda, RecordedBlocksMatchTheUnrecordedForward) {
    if (!have_goldens()) GTEST_SKIP();
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = h3::cli::DeviceSession::open("cuda:0");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    if (!ops::graphs_available(ctx)) GTEST_SKIP() << "H3_CUDA_GRAPHS=0";
    for (auto prec : {DitPrecision::kBf16, DitPrecision::kFp32}) {
        SCOPED_TRACE(precision_name(prec));
        auto ckpt = open_dit_checkpoint(golden_dir("B") + "/diffusers");
        ASSERT_TRUE(ckpt.ok());
        auto in = DitInputs::from_file(golden_dir("B") + "/inputs.safetensors");
        auto packed = pack_inputs(*in, ckpt->config);
        ASSERT_TRUE(packed.ok());
        auto m = DitModel::load(*ckpt, {.device = Device::cuda(0), .precision = prec}, ctx);
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        std::vector<float> schedule = packed->timesteps;
        for (float t : {0.91f, 0.63f, 0.37f, 0.12f}) schedule.push_back(t);
        auto tables = (*m)->compute_adaln_tables(schedule);
        ASSERT_TRUE(tables.ok());
        std::vector<DitPackedInputs> steps;
        for (int s = 0; s < 4; ++s) {
            DitPackedInputs st = *packed;
            for (float& t : st.timesteps) t = schedule[packed->timesteps.size() + static_cast<size_t>(s)];
            Tensor src = *(*packed->video.to(Device::cpu())).to_dtype(DType::kF32);
            st.video = Tensor::host(src.shape(), DType::kF32); // a copy of its own (to() may share storage)
            const float* a = src.data_as<const float>();
            float* v = st.video.data_as<float>();
            for (int64_t i = 0; i < src.numel(); ++i) v[i] = a[i] * (1.0f - 0.15f * static_cast<float>(s));
            steps.push_back(std::move(st));
        }
        auto run_steps = [&](bool graphs, std::shared_ptr<DitWorkspace>* ws) {
            std::vector<DitOutputs> outs;
            auto state = (*m)->prepare_request(*packed);
            EXPECT_TRUE(state.ok());
            if (!state.ok()) return outs;
            DitForwardOptions o;
            o.block_graphs = graphs;
            for (const DitPackedInputs& st : steps) {
                auto r = (*m)->forward(st, &*tables, o, &*state);
                EXPECT_TRUE(r.ok()) << r.status().to_string();
                if (!r.ok()) return outs;
                outs.push_back(std::move(*r));
            }
            *ws = state->workspace;
            return outs;
        };
        std::shared_ptr<DitWorkspace> ws_plain, ws_graphs;
        auto plain = run_steps(false, &ws_plain);
        auto recorded = run_steps(true, &ws_graphs);
        ASSERT_EQ(plain.size(), 4u);
        ASSERT_EQ(recorded.size(), 4u);
        for (size_t s = 0; s < 4; ++s) {
            EXPECT_EQ(compare(recorded[s].sample, plain[s].sample).max_abs, 0.0) << "step " << s;
            EXPECT_EQ(compare(recorded[s].audio_sample, plain[s].audio_sample).max_abs, 0.0) << "step " << s;
        }
        EXPECT_GT(compare(plain[3].sample, plain[0].sample).max_abs, 0.0) << "the steps must differ";
        const uint64_t L = static_cast<uint64_t>(ckpt->config.num_layers);
        EXPECT_EQ(ws_plain->graphs.recorded, 0u);
        EXPECT_EQ(ws_graphs->graphs.failed, 0u) << ws_graphs->graphs.last_error;
        EXPECT_EQ(ws_graphs->graphs.recorded, L);
        EXPECT_EQ(ws_graphs->graphs.launched, 3 * L); // forwards 2, 3 and 4
        EXPECT_GT(ws_graphs->graphs.nodes, 0u);
        // A forward with a hook runs every op from the host, over the same workspace, with the same result.
        auto state = (*m)->prepare_request(*packed);
        ASSERT_TRUE(state.ok());
        DitForwardOptions hooked;
        int seen = 0;
        hooked.hook.wants = [](const std::string& n) { return n == "blocks.0.out"; };
        hooked.hook.record = [&](const std::string&, const Tensor&) { ++seen; };
        for (int rep = 0; rep < 2; ++rep) {
            auto r = (*m)->forward(steps[1], &*tables, hooked, &*state);
            ASSERT_TRUE(r.ok()) << r.status().to_string();
            EXPECT_EQ(compare(r->sample, plain[1].sample).max_abs, 0.0);
        }
        EXPECT_EQ(seen, 2);
        EXPECT_EQ(state->workspace->graphs.recorded, 0u);
    }
}

#include "model/dit/adaln_cache.h"

TEST(Dit, AdalnTablesStreamFromTheCheckpointAndCacheOnDisk) {
    if (!have_goldens()) GTEST_SKIP();
    auto ckpt = open_dit_checkpoint(golden_dir("B") + "/original");
    ASSERT_TRUE(ckpt.ok());
    auto in = DitInputs::from_file(golden_dir("B") + "/inputs.safetensors");
    auto packed = pack_inputs(*in, ckpt->config);
    auto full = DitModel::load(*ckpt, {.precision = DitPrecision::kBf16}, ops::Context::cpu());
    auto lean =
        DitModel::load(*ckpt, {.precision = DitPrecision::kBf16, .load_adaln = false}, ops::Context::cpu());
    ASSERT_TRUE(full.ok() && lean.ok());
    // Without AdaLN weights and without a checkpoint to stream from: a clear error.
    auto none = (*lean)->compute_adaln_tables(packed->timesteps);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.status().message().find("AdaLN"), std::string::npos);
    auto want = (*full)->forward(*packed, nullptr);
    ASSERT_TRUE(want.ok());
    std::string dir = std::string(H3_BINARY_DIR) + "/adaln_cache_test";
    std::filesystem::remove_all(dir);
    auto first = cached_adaln_tables(**lean, *ckpt, packed->timesteps, dir);
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    EXPECT_FALSE(first->hit);
    auto second = cached_adaln_tables(**lean, *ckpt, packed->timesteps, dir);
    ASSERT_TRUE(second.ok());
    EXPECT_TRUE(second->hit);
    for (const auto* t : {&first->tables, &second->tables}) {
        auto got = (*lean)->forward(*packed, t);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        EXPECT_EQ(compare(got->sample, want->sample).max_abs, 0.0);
        EXPECT_EQ(compare(got->audio_sample, want->audio_sample).max_abs, 0.0);
    }
    // A damaged cache file is recomputed, not trusted.
    std::string file =
        dir + "/" + adaln_cache_file_name(checkpoint_identity(*ckpt), DitPrecision::kBf16, packed->timesteps);
    std::filesystem::resize_file(file, 100);
    auto third = cached_adaln_tables(**lean, *ckpt, packed->timesteps, dir);
    ASSERT_TRUE(third.ok());
    EXPECT_FALSE(third->hit);
    auto got = (*lean)->forward(*packed, &third->tables);
    EXPECT_EQ(compare(got->sample, want->sample).max_abs, 0.0);
}
