// DitPrecision::kFp8 on a small random DiT with the official head dim (128, so the blocks' attention runs in
// e4m3 too): the fp8 velocity against bf16 on the CPU (the simulated e4m3 path) within a stated bound; with a
// CUDA device, the CUDA fp8 forward against the CPU fp8 forward (the same quantization); bad exception lists
// are reported by name; with VSA the fused quantization and the e4m3 block-sparse attention, with FastH3's
// compression gates as e4m3 GEMMs on the fused rows (and the fallbacks that remain: a bf16 gate, LoRA).
#include "core/cuda_api.h"
#include "model/dit/dit_attention.h"
#include "model/dit/dit_fp8.h"
#include "model/dit/dit_model.h"
#include "model/dit/dit_random.h"
#include "model/lora/lora_random.h"
#include "model/lora/lora_set.h"
#include "ops/provenance.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_context.h"
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>

namespace h3::model {
namespace {

DitConfig small_config() {
    DitConfig c;
    c.num_attention_heads = 2;
    c.attention_head_dim = 128;
    c.hidden_size = 256;
    c.num_layers = 3;
    c.num_refiner_layers = 1;
    c.ffn_dim = 512;
    c.text_dim = 64;
    c.time_embed_hidden_dim = 64;
    c.time_embed_dim = 64;
    return c;
}

// 20 text rows, 2 x 20 audio rows, 4 latent frames of 12 x 12 (144 video rows): 204 rows, two 128-row
// attention blocks.
SyntheticLayout small_layout() {
    SyntheticLayout l;
    l.text = 20;
    l.audio = 20;
    l.latent_frames = 4;
    l.latent_h = 12;
    l.latent_w = 12;
    return l;
}

struct Agreement {
    double cosine, rel_rms;
};
Agreement agree(const Tensor& got, const Tensor& want) {
    double gw = 0, gg = 0, ww = 0, dd = 0;
    const float* g = got.data_as<const float>();
    const float* w = want.data_as<const float>();
    for (int64_t i = 0; i < want.numel(); ++i) {
        gw += static_cast<double>(g[i]) * w[i], gg += static_cast<double>(g[i]) * g[i];
        ww += static_cast<double>(w[i]) * w[i], dd += (static_cast<double>(g[i]) - w[i]) * (g[i] - w[i]);
    }
    return {gw / std::sqrt(gg * ww), std::sqrt(dd / ww)};
}

struct BothRuns {
    DitOutputs bf16, fp8;
    // What the fp8 forward ran (ops/provenance.h): stage "job" → family → implementation → calls, and the
    // fallbacks it noted.
    ops::ProvenanceRecord::Calls fp8_calls;
    std::vector<ops::Fallback> fp8_fallbacks;
};

// How run_both builds and runs its two forwards.
struct RunSpec {
    bool fast_accum = DitFp8Options{}.fast_accum;    // the e4m3 GEMMs' accumulation
    bool fused = DitFp8Options{}.fused_quantization; // DitFp8Options::fused_quantization
    DitForwardOptions options = {};                  // e.g. VSA attention (the same in both forwards)
    bool gates = false;                              // FastH3's compression gate in every block
    std::vector<std::string> bf16_layers = DitFp8Options{}.bf16_layers; // the fp8 exceptions
    bool bf16 = true; // false: the fp8 forward alone (BothRuns::bf16 stays empty)
};

// One forward in bf16 and one in fp8 on `ctx`, the same random weights and inputs.
BothRuns run_both(const ops::Context& ctx, const RunSpec& spec = {}) {
    const DitConfig c = small_config();
    auto w =
        random_dit_weights(c, ctx, DitPrecision::kBf16,
                           {.blocks = c.num_layers, .adaln = false, .gate_compress = spec.gates, .seed = 4});
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    // Random gates are as small as the other projections: ×8 (exact in bf16) makes the compression branch
    // move the velocity far beyond the fp8 rounding, so a gate GEMM gone wrong shows.
    for (DitBlockWeights& b : w->blocks) {
        if (!b.gate_compress.defined()) continue;
        auto f = b.gate_compress.to(Device::cpu()).value().to_dtype(DType::kF32);
        EXPECT_TRUE(f.ok());
        for (int64_t i = 0; i < f->numel(); ++i) f->data_as<float>()[i] *= 8.0f;
        b.gate_compress = f->to_dtype(DType::kBF16).value().to(ctx.device).value();
    }
    const DitPackedInputs in = synthetic_inputs(c, small_layout(), 0.4f, 0.6f, 5);
    auto tables = random_adaln_tables(c, ctx, DType::kBF16, in.timesteps, c.num_layers, 6);
    EXPECT_TRUE(tables.ok());
    BothRuns r;
    if (spec.bf16) {
        DitModel m(c, *w, DitPrecision::kBf16, ctx);
        auto out = m.forward(in, &*tables, spec.options);
        EXPECT_TRUE(out.ok()) << out.status().to_string();
        r.bf16 = *out;
    }
    DitWeights q = *w;
    Status st = quantize_dit_fp8(
        ctx, c,
        {.bf16_layers = spec.bf16_layers, .fast_accum = spec.fast_accum, .fused_quantization = spec.fused},
        q);
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(q.blocks[1].fp8.gemm.fast_accum, spec.fast_accum);
    EXPECT_TRUE(q.blocks[0].fp8.attention && q.blocks[0].fp8.ff_in.defined());
    EXPECT_FALSE(q.blocks[2].fp8.ff_out.defined()); // the default exception: the last block's ff_out
    EXPECT_FALSE(q.blocks[0].to_q.defined());       // quantized weights drop their bf16 copy
    EXPECT_EQ(q.has_gate_compress(), spec.gates);
    ops::ProvenanceRecord record;
    {
        const ops::ProvenanceScope scope(&record);
        DitModel m(c, q, DitPrecision::kFp8, ctx);
        auto out = m.forward(in, &*tables, spec.options);
        EXPECT_TRUE(out.ok()) << out.status().to_string();
        r.fp8 = *out;
    }
    r.fp8_calls = record.calls();
    r.fp8_fallbacks = record.fallbacks();
    return r;
}

// Host calls of `family`'s implementation `impl` in a run's record (0 when none).
#ifdef H3_WITH_CUDA
// CUDA device 0 when it is an H100/H200 (sm_90a: the e4m3 attention and the wgmma kernels); else `skip` says
// why the test skips (a context that fails to open is also a test failure).
struct HopperDevice {
    std::unique_ptr<ops::CudaContext> cuda;
    std::string skip;
    ops::Context ctx() const { return {.device = Device::cuda(0), .cuda = cuda.get()}; }
};

HopperDevice hopper_device() {
    HopperDevice h;
    if (cuda::device_count() == 0) {
        h.skip = "no CUDA device";
        return h;
    }
    auto cc = ops::CudaContext::create(0);
    EXPECT_TRUE(cc.ok()) << cc.status().to_string();
    if (!cc.ok()) {
        h.skip = "no CUDA context";
        return h;
    }
    if ((*cc)->cc_major() != 9) {
        h.skip = "needs an H100/H200 (sm_90a)";
        return h;
    }
    h.cuda = std::move(cc).value();
    return h;
}
#endif

int64_t calls(const BothRuns& r, const std::string& family, const std::string& impl) {
    const auto job = r.fp8_calls.find("job");
    if (job == r.fp8_calls.end()) return 0;
    const auto f = job->second.find(family);
    if (f == job->second.end()) return 0;
    const auto i = f->second.find(impl);
    return i == f->second.end() ? 0 : i->second;
}

// Measured (CPU, this layout): video and audio cos 0.999983, rel-RMS 0.0059; the bound leaves 3x room.
TEST(DitFp8, VelocityWithinBoundOfBf16OnCpu) {
    const BothRuns r = run_both(ops::Context::cpu());
    const Agreement v = agree(r.fp8.sample, r.bf16.sample),
                    a = agree(r.fp8.audio_sample, r.bf16.audio_sample);
    std::printf("fp8 vs bf16 (CPU): video cos %.6f rel-RMS %.4f, audio cos %.6f rel-RMS %.4f\n", v.cosine,
                v.rel_rms, a.cosine, a.rel_rms);
    EXPECT_GT(v.cosine, 0.9995);
    EXPECT_LT(v.rel_rms, 0.02);
    EXPECT_GT(a.cosine, 0.9995);
    EXPECT_LT(a.rel_rms, 0.02);
}

// Fused quantization (the norms and SwiGLU write the GEMMs' e4m3 rows) gives the same bytes as rounding the
// bf16 rows in each GEMM: the fp8 forward is bit-for-bit the same either way, on the CPU and, where the
// kernels run, on CUDA. The last block's ff_out stays bf16 (the default exception), so its SwiGLU runs
// unfused there: both paths meet in one forward.
void expect_fused_equals_unfused(const ops::Context& ctx, const DitForwardOptions& options = {},
                                 bool gates = false) {
    RunSpec spec{.fast_accum = true, .fused = true, .options = options, .gates = gates, .bf16 = false};
    const BothRuns fused = run_both(ctx, spec);
    spec.fused = false;
    const BothRuns plain = run_both(ctx, spec);
    EXPECT_TRUE(fused.fp8_fallbacks.empty()) << fused.fp8_fallbacks[0].why;
    EXPECT_GT(calls(fused, "fp8_quantization", "fused"), 0);
    EXPECT_EQ(calls(plain, "fp8_quantization", "fused"), 0);
    for (const auto& [name, a, b] : {std::tuple<const char*, const Tensor*, const Tensor*>{
                                         "video", &fused.fp8.sample, &plain.fp8.sample},
                                     {"audio", &fused.fp8.audio_sample, &plain.fp8.audio_sample}}) {
        ASSERT_EQ(a->numel(), b->numel()) << name;
        ASSERT_GT(a->numel(), 0) << name;
        EXPECT_EQ(std::memcmp(a->data(), b->data(), static_cast<size_t>(a->numel()) * 4), 0)
            << name << ": the fused fp8 forward differs from the unfused one";
    }
}

TEST(DitFp8, FusedQuantizationIsExactOnCpu) {
    expect_fused_equals_unfused(ops::Context::cpu());
}

// VSA (no compression gates: the norms' bf16 rows are not needed) with fp8: the fused quantization and the
// e4m3 block-sparse attention; the same bytes fused or not, and within the dense fp8 bound of bf16 VSA.
DitForwardOptions vsa_options(const char* spec = "vsa:sparsity=0.5") {
    DitForwardOptions o;
    auto a = parse_attention_choice(spec);
    EXPECT_TRUE(a.ok()) << a.status().to_string();
    o.attention = *a;
    return o;
}

TEST(DitFp8, VsaFusedQuantizationIsExactOnCpu) {
    expect_fused_equals_unfused(ops::Context::cpu(), vsa_options());
}

TEST(DitFp8, VsaVelocityWithinBoundOfBf16VsaOnCpu) {
    const BothRuns r = run_both(ops::Context::cpu(), {.options = vsa_options()});
    const Agreement v = agree(r.fp8.sample, r.bf16.sample),
                    a = agree(r.fp8.audio_sample, r.bf16.audio_sample);
    std::printf("fp8 VSA vs bf16 VSA (CPU): video cos %.6f rel-RMS %.4f, audio cos %.6f rel-RMS %.4f\n",
                v.cosine, v.rel_rms, a.cosine, a.rel_rms);
    EXPECT_GT(v.cosine, 0.9995);
    EXPECT_LT(v.rel_rms, 0.02);
    EXPECT_GT(a.cosine, 0.9995);
    EXPECT_LT(a.rel_rms, 0.02);
}

// FastH3's compression gates (VSA): under fp8 the gate is an e4m3 GEMM like q/k/v, on the norm's e4m3 rows
// when the quantization is fused (issue #45, "fp8 and VSA together"). Fused or not, the same bytes; no
// fallback, and the provenance names one e4m3 GEMM more per block than without gates and no other change.
TEST(DitFp8, VsaWithGatesFusedQuantizationIsExactOnCpu) {
    expect_fused_equals_unfused(ops::Context::cpu(), vsa_options(), true);
}

TEST(DitFp8, VsaGatesRunAsE4m3GemmsOnTheFusedRows) {
    const BothRuns gated = run_both(ops::Context::cpu(),
                                    {.options = vsa_options(), .gates = true, .bf16 = false}),
                   plain = run_both(ops::Context::cpu(), {.options = vsa_options(), .bf16 = false});
    const int64_t blocks = small_config().num_layers;
    EXPECT_TRUE(gated.fp8_fallbacks.empty()) << gated.fp8_fallbacks[0].why;
    EXPECT_EQ(calls(gated, "gemm", "cpu-e4m3"), calls(plain, "gemm", "cpu-e4m3") + blocks)
        << "one e4m3 gate GEMM per block";
    EXPECT_EQ(calls(gated, "gemm", "cpu-bf16"), calls(plain, "gemm", "cpu-bf16"));
    EXPECT_GT(calls(gated, "fp8_quantization", "fused"), 0);
    // The gate reads the norm's e4m3 rows (no quantization of its own), and the separate gate add writes
    // to_out's e4m3 rows (vsa_gate_add_fp8): to_out's quantization, the one unfused quantization left without
    // gates (the blocks whose to_out is e4m3), becomes fused.
    const int64_t to_out = calls(plain, "fp8_quantization", "unfused");
    EXPECT_GT(to_out, 0);
    EXPECT_EQ(calls(gated, "fp8_quantization", "fused"), calls(plain, "fp8_quantization", "fused") + to_out);
    EXPECT_EQ(calls(gated, "fp8_quantization", "unfused"), 0);
    EXPECT_GT(calls(gated, "sparse_attention", "cpu-e4m3"), 0);
}

// Measured (CPU, this layout, the gates ×8): fp8 VSA with gates vs bf16 VSA with gates: video cos 0.999963,
// rel-RMS 0.0086, audio cos 0.999967, rel-RMS 0.0081; the same bound as without gates.
TEST(DitFp8, VsaWithGatesVelocityWithinBoundOfBf16VsaOnCpu) {
    const BothRuns r = run_both(ops::Context::cpu(), {.options = vsa_options(), .gates = true}),
                   ungated = run_both(ops::Context::cpu(), {.options = vsa_options()});
    const Agreement v = agree(r.fp8.sample, r.bf16.sample),
                    a = agree(r.fp8.audio_sample, r.bf16.audio_sample);
    const Agreement g = agree(ungated.bf16.sample, r.bf16.sample);
    std::printf("fp8 VSA vs bf16 VSA, gated (CPU): video cos %.6f rel-RMS %.4f, audio cos %.6f rel-RMS %.4f; "
                "bf16 without the gates: video rel-RMS %.4f\n",
                v.cosine, v.rel_rms, a.cosine, a.rel_rms, g.rel_rms);
    // Measured 0.083: 4× the bound below, so a gate GEMM skipped or scaled wrong fails it.
    EXPECT_GT(g.rel_rms, 0.05) << "the gates must move the velocity well beyond the bound below";
    EXPECT_GT(v.cosine, 0.9995);
    EXPECT_LT(v.rel_rms, 0.02);
    EXPECT_GT(a.cosine, 0.9995);
    EXPECT_LT(a.rel_rms, 0.02);
}

// An exception keeping every block's gate in bf16 is the path fp8 + VSA took before the gate had an e4m3
// copy: the bf16 gate reads the bf16 rows, so the blocks' quantization runs unfused and the forward notes one
// fallback saying why. The fused e4m3-gate forward differs from it only by the gate GEMM's e4m3 rounding.
TEST(DitFp8, VsaGateKeptInBf16RunsUnfusedWithItsReason) {
    const std::vector<std::string> keep = {"blocks.-1.to_out", "blocks.-1.ff_out",
                                           "blocks.0.to_gate_compress", "blocks.1.to_gate_compress",
                                           "blocks.2.to_gate_compress"};
    const BothRuns bf16_gate = run_both(ops::Context::cpu(),
                                        {.options = vsa_options(), .gates = true, .bf16_layers = keep}),
                   fused = run_both(ops::Context::cpu(), {.options = vsa_options(), .gates = true}),
                   plain = run_both(ops::Context::cpu(), {.options = vsa_options()});
    ASSERT_EQ(bf16_gate.fp8_fallbacks.size(), 1u);
    EXPECT_EQ(bf16_gate.fp8_fallbacks[0].family, "fp8_quantization");
    EXPECT_EQ(bf16_gate.fp8_fallbacks[0].wanted, "fused");
    EXPECT_EQ(bf16_gate.fp8_fallbacks[0].used, "unfused");
    EXPECT_NE(bf16_gate.fp8_fallbacks[0].why.find("compression gate"), std::string::npos);
    const int64_t blocks = small_config().num_layers;
    EXPECT_EQ(calls(bf16_gate, "gemm", "cpu-e4m3"), calls(plain, "gemm", "cpu-e4m3"));
    EXPECT_EQ(calls(bf16_gate, "gemm", "cpu-bf16"), calls(plain, "gemm", "cpu-bf16") + blocks)
        << "one bf16 gate GEMM per block";
    EXPECT_LT(calls(bf16_gate, "fp8_quantization", "fused"), calls(fused, "fp8_quantization", "fused"));
    // Measured: video and audio cos 0.999979, rel-RMS 0.0065 (the gate GEMM's e4m3 rounding alone; random
    // data, so ~8 % of the gates' own 0.083); the bound leaves 3x room and stays 4x below what a skipped gate
    // GEMM gives.
    const Agreement v = agree(fused.fp8.sample, bf16_gate.fp8.sample),
                    a = agree(fused.fp8.audio_sample, bf16_gate.fp8.audio_sample);
    std::printf("fp8 VSA, e4m3 gate (fused) vs bf16 gate (unfused): video cos %.7f rel-RMS %.5f, audio cos "
                "%.7f rel-RMS %.5f\n",
                v.cosine, v.rel_rms, a.cosine, a.rel_rms);
    EXPECT_GT(v.cosine, 0.9999);
    EXPECT_LT(v.rel_rms, 0.02);
    EXPECT_GT(a.cosine, 0.9999);
    EXPECT_LT(a.rel_rms, 0.02);
}

// Run-time LoRA adapters read the blocks' bf16 rows: fp8 + VSA with gates still falls back to the unfused
// quantization there, for that reason alone (the e4m3 gate needs no bf16 rows).
TEST(DitFp8, VsaWithRuntimeLoraStillRunsUnfused) {
    const ops::Context ctx = ops::Context::cpu();
    auto adapter = random_lora_adapter(small_config(), {.rank = 4, .seed = 9});
    ASSERT_TRUE(adapter.ok()) << adapter.status().to_string();
    auto set = LoraSet::build({{std::make_shared<const LoraAdapter>(std::move(adapter).value()), 1.0f}},
                              small_config(), ctx, DType::kBF16);
    ASSERT_TRUE(set.ok()) << set.status().to_string();
    DitForwardOptions o = vsa_options();
    o.lora = set->get();
    const BothRuns r = run_both(ctx, {.options = o, .gates = true, .bf16 = false});
    ASSERT_EQ(r.fp8_fallbacks.size(), 1u);
    EXPECT_EQ(r.fp8_fallbacks[0].used, "unfused");
    EXPECT_NE(r.fp8_fallbacks[0].why.find("LoRA"), std::string::npos) << r.fp8_fallbacks[0].why;
    EXPECT_GT(calls(r, "fp8_quantization", "unfused"), 0);
}

TEST(DitFp8, FusedQuantizationIsExactOnCuda) {
#ifdef H3_WITH_CUDA
    const HopperDevice hopper = hopper_device();
    if (!hopper.cuda) GTEST_SKIP() << hopper.skip;
    expect_fused_equals_unfused(hopper.ctx());
    expect_fused_equals_unfused(hopper.ctx(), vsa_options());
    expect_fused_equals_unfused(hopper.ctx(), vsa_options(), true);
#else
    GTEST_SKIP() << "CPU-only build";
#endif
}

// The CUDA fp8 forward (either GEMM accumulation: the CPU reference sums exactly) against the CPU fp8 one.
class DitFp8Cuda : public ::testing::TestWithParam<bool> {};

TEST_P(DitFp8Cuda, MatchesTheCpuFp8Path) {
#ifdef H3_WITH_CUDA
    const HopperDevice hopper = hopper_device();
    if (!hopper.cuda) GTEST_SKIP() << hopper.skip;
    const ops::Context ctx = hopper.ctx();
    const bool fast = GetParam();
    const BothRuns gpu = run_both(ctx, {.fast_accum = fast}),
                   cpu = run_both(ops::Context::cpu(), {.fast_accum = fast});
    const Agreement v = agree(gpu.fp8.sample, cpu.fp8.sample), b = agree(gpu.bf16.sample, cpu.bf16.sample);
    const Agreement f = agree(gpu.fp8.sample, gpu.bf16.sample);
    std::printf(
        "CUDA vs CPU (%s accumulation): fp8 video cos %.6f rel-RMS %.4f; bf16 video cos %.6f rel-RMS %.4f; "
        "CUDA fp8 vs bf16 cos %.6f rel-RMS %.4f\n",
        fast ? "fast" : "exact", v.cosine, v.rel_rms, b.cosine, b.rel_rms, f.cosine, f.rel_rms);
    EXPECT_GT(v.cosine, 0.9995);
    EXPECT_LT(v.rel_rms, 0.02);
    EXPECT_GT(f.cosine, 0.9995);
    EXPECT_LT(f.rel_rms, 0.02);
#else
    GTEST_SKIP() << "CPU-only build";
#endif
}

INSTANTIATE_TEST_SUITE_P(Accumulation, DitFp8Cuda, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Fast" : "Exact"; });

// FastH3's gated VSA blocks on CUDA against the CPU, bf16 and fp8, with gate_add=fused: the sparse blocks run
// the compression first and the wgmma kernels add the gate in their epilogue (noted "+gate"; the CPU runs the
// attention, then the gate add), so a gate add gone wrong in the kernel shows against the CPU's.
TEST(DitFp8, VsaWithGatesOnCudaMatchesTheCpu) {
#ifdef H3_WITH_CUDA
    const HopperDevice hopper = hopper_device();
    if (!hopper.cuda) GTEST_SKIP() << hopper.skip;
    const ops::Context ctx = hopper.ctx();
    const RunSpec spec{.options = vsa_options("vsa:sparsity=0.5,gate_add=fused"), .gates = true};
    const BothRuns gpu = run_both(ctx, spec), cpu = run_both(ops::Context::cpu(), spec);
    EXPECT_GT(calls(gpu, "sparse_attention", "sm90a-wgmma-e4m3+gate"), 0);
    const Agreement v = agree(gpu.fp8.sample, cpu.fp8.sample), b = agree(gpu.bf16.sample, cpu.bf16.sample),
                    a = agree(gpu.bf16.audio_sample, cpu.bf16.audio_sample);
    std::printf("gated VSA, CUDA vs CPU: fp8 video cos %.6f rel-RMS %.4f; bf16 video cos %.6f rel-RMS %.4f, "
                "audio cos %.6f rel-RMS %.4f\n",
                v.cosine, v.rel_rms, b.cosine, b.rel_rms, a.cosine, a.rel_rms);
    EXPECT_GT(v.cosine, 0.9995);
    EXPECT_LT(v.rel_rms, 0.02);
    EXPECT_GT(b.cosine, 0.9995);
    EXPECT_LT(b.rel_rms, 0.02);
    EXPECT_GT(a.cosine, 0.9995);
    EXPECT_LT(a.rel_rms, 0.02);
#else
    GTEST_SKIP() << "CPU-only build";
#endif
}

// VsaOptions::gate_add: the compression branch added by the sparse kernel's epilogue (fused) or by its own
// pass after the attention (separate) gives the same bytes, bf16 and fp8. On CUDA the provenance shows which
// kernel ran (`gated_impl` fused, `plain_impl` separate; nullptr: not checked).
void expect_gate_add_modes_agree(const ops::Context& ctx, const char* gated_impl, const char* plain_impl) {
    RunSpec spec{.options = vsa_options(), .gates = true};
    const BothRuns separate = run_both(ctx, spec); // the default
    auto a = parse_attention_choice("vsa:sparsity=0.5,gate_add=fused");
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    spec.options.attention = *a;
    const BothRuns fused = run_both(ctx, spec);
    for (const auto& [name, x, y] : {std::tuple<const char*, const Tensor*, const Tensor*>{
                                         "fp8 video", &fused.fp8.sample, &separate.fp8.sample},
                                     {"fp8 audio", &fused.fp8.audio_sample, &separate.fp8.audio_sample},
                                     {"bf16 video", &fused.bf16.sample, &separate.bf16.sample},
                                     {"bf16 audio", &fused.bf16.audio_sample, &separate.bf16.audio_sample}}) {
        ASSERT_EQ(x->numel(), y->numel()) << name;
        ASSERT_GT(x->numel(), 0) << name;
        EXPECT_EQ(std::memcmp(x->data(), y->data(), static_cast<size_t>(x->numel()) * 4), 0)
            << name << ": gate_add=separate differs from the fused gate add";
    }
    if (gated_impl) {
        EXPECT_GT(calls(fused, "sparse_attention", gated_impl), 0);
        EXPECT_EQ(calls(separate, "sparse_attention", gated_impl), 0);
        EXPECT_GT(calls(separate, "sparse_attention", plain_impl), 0);
    }
}

TEST(DitFp8, VsaGateAddModesAgreeOnCpu) {
    expect_gate_add_modes_agree(ops::Context::cpu(), nullptr, nullptr);
}

TEST(DitFp8, VsaGateAddModesAgreeOnCuda) {
#ifdef H3_WITH_CUDA
    const HopperDevice hopper = hopper_device();
    if (!hopper.cuda) GTEST_SKIP() << hopper.skip;
    expect_gate_add_modes_agree(hopper.ctx(), "sm90a-wgmma-e4m3+gate", "sm90a-wgmma-e4m3");
#else
    GTEST_SKIP() << "CPU-only build";
#endif
}

TEST(DitFp8, BadExceptionsAreReportedByName) {
    const DitConfig c = small_config();
    auto w = random_dit_weights(c, ops::Context::cpu(), DitPrecision::kBf16, {.blocks = 3, .seed = 1});
    ASSERT_TRUE(w.ok());
    for (auto [entry, msg] : {std::pair<const char*, const char*>{"blocks.3.ff_out", "outside [-3, 3)"},
                              {"blocks.-4.to_q", "outside"},
                              {"blocks.0.fc2", "layer 'fc2'"},
                              {"block.0.to_q", "expected blocks.N.LAYER"},
                              {"blocks.x.to_q", "block index x"}}) {
        Status s = quantize_dit_fp8(ops::Context::cpu(), c, {.bf16_layers = {entry}}, *w);
        EXPECT_FALSE(s.ok()) << entry;
        EXPECT_NE(s.message().find(msg), std::string::npos) << s.to_string();
        EXPECT_NE(s.message().find(entry), std::string::npos) << s.to_string();
    }
    Status s =
        quantize_dit_fp8(ops::Context::cpu(), c, {.bf16_layers = {"blocks.-1.*", "blocks.0.attention"}}, *w);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_FALSE(w->blocks[2].fp8.to_q.defined());
    EXPECT_FALSE(w->blocks[0].fp8.attention);
    EXPECT_TRUE(w->blocks[1].fp8.attention);
}

} // namespace
} // namespace h3::model
