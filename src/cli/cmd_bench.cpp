// h3-engine bench dit --config official|CONFIG.json --random-weights [--size WxH] [--frames F] [--text L]
//                     [--blocks N] [--device cuda] [--dtype bf16|fp32|fp16] [--precision fp8] [--iters K]
//                     [--fp8-accum exact|fast] [--fp8-fused on|off]
//                     [--block-graphs] [--attention-candidates]
//                     [--json]
//                     [--residency resident|layerwise] [--resident-blocks K] [--weight-dtype bf16|int8|auto]
//                     [--host-pinning on|off] [--gpu-memory-budget SIZE]
//                     [--lora-rank R [--lora-mode runtime|merged|both]]
//                     [--attention dense|vsa[:sparsity=0.9,mode=exempt]] [--vsa-scan 0.1,0.25,0.5,1]
//                     [--sp 1 --tp 1 [--ring 1]]   (the forwards through the device group's code path on one
//                                                   rank: its overhead against the same bench without them)
// h3-engine bench vae --config official --random-weights [--size WxH] [--frames F] [--tiles N] [--json]
// h3-engine bench vae --encode --random-weights [--size WxH] [--json]   (one keyframe through the encoder)
// h3-engine bench vae --reference --random-weights [--size WxH] [--frames F] [--json]   (ref2va encoders)
// Times DiT blocks with random full-width weights generated on the device: seconds per block and per
// 50-block forward, useful TFLOP/s, attention TFLOP/s on the same shape, and peak device memory. Every timed
// pass runs the blocks back to back and synchronizes once at its end, so streamed blocks (layerwise) overlap
// their uploads with compute as in a forward; the JSON then adds the bytes uploaded per pass, the rate they
// arrived at during the pass, the link's own H2D rate (one block's bytes, pinned and pageable) and the plan.
// Attention is also timed alone on the last block's own q, k, v (and with --attention-candidates every
// candidate on them), to tell the data's effect from the forward's context.
#include "cli/app.h"
#include "cli/bench_lora.h"
#include "cli/bench_vsa.h"
#include "cli/commands.h"
#include "cli/device_setup.h"
#include "cli/residency_flags.h"
#include "core/cuda_api.h"
#include "core/device_stream.h"
#include "core/phase_timer.h"
#include "model/audio_vae/audio_vae.h"
#include "model/audio_vae/audio_vae_encoder.h"
#include "model/dit/dit_fp8.h"
#include "model/dit/dit_random.h"
#include "model/video_vae/video_vae.h"
#include "model/video_vae/video_vae_encoder.h"
#include "ops/cuda/cuda_context.h"
#include "ops/ops.h"
#include "runtime/device_group.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

namespace h3::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
    std::string config = "official", size = "1344x768", device = "cuda", dtype = "bf16", precision;
    int frames = 124, text = 537, blocks = 4, iters = 2;
    bool random_weights = false, json = false;
    bool block_graphs = false;         // also time the forward with recorded blocks (CUDA graphs)
    bool attention_candidates = false; // every attention candidate on the forward's own q, k, v
    int64_t lora_rank = 0;          // > 0: also time random rank-R adapters on q/k/v/out/FFN of every block
    std::string lora_mode = "both"; // runtime | merged | both
    std::string attention = "dense";
    std::string fp8_accum;        // --precision fp8: "exact" | "fast" (empty: DitFp8Options' default)
    std::string fp8_fused = "on"; // --precision fp8: on | off (DitFp8Options::fused_quantization)
    std::vector<double> vsa_scan = {0.1, 0.25, 0.5, 1.0}; // kept fractions timed with --attention vsa
    ResidencyFlags residency;
    int sp = 0, tp = 0, ring = 0; // 0: not given; 1: the group path at world size 1 (nothing else is allowed)
    int overlap_groups = 0;       // --sp 1: the Ulysses head groups (DitParallel::overlap_groups)
    CLI::App* sub = nullptr;
};

// --sp 1 --tp 1 [--ring 1]: a DeviceGroup of one rank whose DiT view takes the sequence-parallel code path
// (size-1 communicators: the shard copy, Ulysses' packing and all-to-alls, the final all_gather, the cache
// probe's all-reduce; with --ring 1 the ring's all_gathers, lse attention and merges). tp stays unwired: a
// one-rank tp path would copy every block's weights into a shard.
Result<std::unique_ptr<runtime::DeviceGroup>> one_rank_group(const BenchOptions& o, const ops::Context& ctx) {
    if (o.sp == 0 && o.tp == 0 && o.ring == 0) return std::unique_ptr<runtime::DeviceGroup>();
    if (o.sp > 1 || o.tp > 1 || o.ring > 1)
        return invalid_argument("bench dit times one device: --sp, --tp and --ring take 1 (the parallel code "
                                "path at world size 1); several ranks run through `generate --sp N`");
    runtime::ParallelPlan plan;
    plan.force_sequence_path = o.sp == 1 || o.tp == 1;
    plan.force_ring_path = o.ring == 1;
    plan.overlap_groups = o.overlap_groups;
    return runtime::DeviceGroup::create(plan, ctx);
}

// Seconds for copying `bytes` from host memory (pinned or pageable) to the device on a stream of its own,
// after one untimed copy: the link's H2D rate the streamed weights can reach.
Result<double> h2d_seconds(const ops::Context& ctx, size_t bytes, bool pinned) {
    if (ctx.device.is_cpu()) return 0.0;
    H3_ASSIGN_OR_RETURN(Tensor host,
                        model::host_buffer(Shape{static_cast<int64_t>(bytes)}, DType::kU8, pinned));
    H3_ASSIGN_OR_RETURN(Tensor dev, Tensor::empty(host.shape(), DType::kU8, ctx.device));
    H3_ASSIGN_OR_RETURN(DeviceStream stream, DeviceStream::create(ctx.device));
    H3_TRY(dev.copy_from(host, stream.handle()));
    H3_TRY(stream.synchronize());
    const auto t0 = Clock::now();
    H3_TRY(dev.copy_from(host, stream.handle()));
    H3_TRY(stream.synchronize());
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What the CUDA context's switches say (benches print them so before/after runs are labelled).
bool gemm_autotune(const ops::Context& ctx) {
    return ctx.is_cuda() && ctx.cuda && ctx.cuda->gemm_autotune();
}
// The conv3d choice (H3_CONV3D): auto | igemm16 | wgmma | tf32 | cudnn. Under --exact-fp32 (tf32 false in the
// report) all but cudnn run the fp32 FMA kernel; igemm16 below sm_80 runs the built-in kernels.
std::string conv3d_backend(const ops::Context& ctx) {
#if defined(H3_WITH_CUDA)
    if (ctx.is_cuda() && ctx.cuda) return ops::conv3d_impl_name(ctx.cuda->conv3d_impl());
#endif
    return "cpu";
}

// Block GEMM parameters (q, k, v, out, fc1, fc2) — 385.35 M at the official width.
double block_gemm_params(const model::DitConfig& c) {
    const double D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim;
    return 3 * D * I + I * D + 2 * F * D + F * D;
}

int run_bench(const BenchOptions& o) {
    if (!o.random_weights) {
        std::fprintf(stderr,
                     "h3-engine bench dit: only --random-weights is supported (real weights: use `dit`)\n");
        return kExitUsage;
    }
    model::DitConfig c; // defaults are the official config (test_dit_tensors checks them against the file)
    if (o.config != "official") {
        auto r = model::DitConfig::from_file(o.config);
        if (!r.ok()) return report(r.status());
        c = *r;
    }
    int W = 0, H = 0;
    if (std::sscanf(o.size.c_str(), "%dx%d", &W, &H) != 2 || W <= 0 || H <= 0 || W % 32 || H % 32)
        return report(invalid_argument("--size '" + o.size + "' must be WxH with multiples of 32"));
    if (o.frames < 5 || (o.frames - 5) % 17)
        return report(invalid_argument("--frames " + std::to_string(o.frames) + " must be 17n+5 (e.g. 124)"));
    model::SyntheticLayout layout;
    layout.text = o.text;
    layout.latent_frames = (o.frames - 5) / 17 * 5 + 2;
    layout.latent_h = H / 16;
    layout.latent_w = W / 16;
    layout.audio = static_cast<int64_t>(std::nearbyint(o.frames / 24.0 * 40.0)); // round-half-even
    if (o.sp > 1 || o.tp > 1 || o.ring > 1) return report(one_rank_group(o, ops::Context::cpu()).status());
    auto session = DeviceSession::open(o.device);
    if (!session.ok()) return report(session.status());
    const ops::Context& ctx = (*session)->context();
    auto group = one_rank_group(o, ctx);
    if (!group.ok()) return report(group.status().with_context("bench dit --sp/--tp/--ring"));
    const model::DitParallel* group_dit = *group ? &(*group)->rank(0).dit : nullptr;
    const std::string pname = o.precision.empty() ? o.dtype : o.precision; // --precision wins over --dtype
    auto parsed = model::parse_precision(pname, o.precision.empty() ? "--dtype" : "--precision");
    if (!parsed.ok()) return report(parsed.status());
    const auto prec = *parsed;
    const bool fp8 = prec == model::DitPrecision::kFp8;
    const int blocks = std::max(1, std::min(o.blocks, c.num_layers));
    auto attention = model::parse_attention_choice(o.attention);
    if (!attention.ok()) return report(attention.status());
    // VSA runs a FastH3 student: every block carries its compression gate.
    // Placement of the `blocks` blocks: as the flags say, or planned for the budget.
    model::DitConfig placed = c;
    placed.num_layers = blocks;
    const runtime::Workload wl = workload_for(layout.video_rows(c), 2 * layout.audio, layout.text, 2, 0);
    auto choice = resolve_residency(o.residency, {runtime::dit_component_bytes(placed, prec, wl)});
    if (!choice.ok()) return report(choice.status());
    if (!o.json) std::fprintf(stderr, "bench dit: %s\n", choice->describe().c_str());
    const bool streamed = !choice->dit.plain();
    reset_device_memory_peak();
    auto weights = model::random_dit_weights(c, ctx, prec,
                                             {.blocks = blocks,
                                              .adaln = false,
                                              .gate_compress = attention->is_vsa(),
                                              .seed = 1,
                                              .host_blocks = streamed,
                                              .pinned = choice->dit.pin_host});
    if (!weights.ok()) return report(weights.status());
    std::unique_ptr<model::LayerWeightSource> source;
    if (streamed) {
        if (fp8)
            return report(
                invalid_argument("--precision fp8 keeps its e4m3 block weights resident; drop it or "
                                 "use --residency resident --weight-dtype bf16"));
        auto src = model::make_dit_block_source(*weights, prec, choice->dit, ctx);
        if (!src.ok()) return report(src.status());
        source = std::move(src).value();
    }
    // The model holds `blocks` blocks (a truncated DiT: its forward runs them all); per-forward figures are
    // also extrapolated to the config's block count from the per-block time.
    model::DitConfig truncated = c;
    truncated.num_layers = blocks;
    if (fp8) { // every timed block in e4m3 (the default exceptions name the last of 50 blocks)
        model::DitFp8Options f8{.bf16_layers = {}};
        if (!o.fp8_accum.empty()) f8.fast_accum = o.fp8_accum == "fast";
        f8.fused_quantization = o.fp8_fused == "on";
        Status q = model::quantize_dit_fp8(ctx, truncated, f8, *weights);
        if (!q.ok()) return report(q);
    }
    model::DitModel dit(truncated, std::move(*weights), prec, ctx, std::move(source));
    auto packed = model::synthetic_inputs(c, layout, 0.3f, 0.55f, 2);
    auto tables = model::random_adaln_tables(c, ctx, dit.act_dtype(), packed.timesteps, blocks, 3);
    if (!tables.ok()) return report(tables.status());
    std::shared_ptr<const ops::VsaTiles> vsa_tiles; // VSA: the synthetic layout's tile map
    if (attention->is_vsa()) {
        auto t = dit.prepare_vsa_tiles(packed);
        if (!t.ok()) return report(t.status());
        vsa_tiles = *t;
    }
    const int64_t S = packed.rows, D = c.hidden_size;
    size_t weight_bytes = device_memory_stats().current;
    model::DitForwardOptions fo;
    fo.attention = *attention;
    std::vector<double> per_block;
    std::vector<std::pair<std::string, double>> phases; // per-op seconds summed over one pass of the blocks
    Status st;
    double total = 0, pass_s = 0;
    size_t setup_peak = 0;
    double attn_forward_data_s = 0; // attention alone on the forward's last q, k, v
    std::vector<std::pair<std::string, double>> attn_forward_candidates; // --attention-candidates
    model::ResidencyStats timed_stats; // the block source's counters over the timed passes
    {
        auto rows = dit.build_row_tables(packed, *tables);
        if (!rows.ok()) return report(rows.status());
        rows->vsa = vsa_tiles.get();
        auto h = Tensor::empty(Shape{S, D}, dit.residual_dtype(), ctx.device);
        if (!h.ok()) return report(h.status());
        st = ops::fill_uniform(ctx, {.seed = 9, .bound = 1.0f}, *h);
        if (!st.ok()) return report(st);
        auto scratch = dit.make_scratch(S, fo.ffn_chunk_bytes);
        if (!scratch.ok()) return report(scratch.status());
        // Warm-up (plans, heuristics and GEMM algorithm timing; a streamed model also fills its ring), then
        // timed passes over every block, one synchronization per pass.
        auto pass = [&]() -> Status {
            H3_TRY(ops::fill_uniform(ctx, {.seed = 9, .bound = 1.0f}, *h)); // keeps the residual bounded
            for (int b = 0; b < blocks; ++b)
                H3_TRY(dit.run_block(b, *h, tables->blocks[static_cast<size_t>(b)], *rows, fo, *scratch));
            H3_TRY(dit.end_block_pass());
            return (*session)->synchronize();
        };
        st = pass();
        if (!st.ok()) return report(st);
        setup_peak = device_memory_stats().peak;
        reset_device_memory_peak();
        if (dit.block_source()) dit.block_source()->reset_counters();
        auto t0 = Clock::now();
        for (int it = 0; it < o.iters; ++it) {
            st = pass();
            if (!st.ok()) return report(st);
        }
        total = std::chrono::duration<double>(Clock::now() - t0).count();
        pass_s = total / o.iters;
        if (dit.block_source()) timed_stats = dit.block_source()->stats();
        // Per-op device time: one more pass with events between the ops (no syncs inside the pass).
        PhaseTimer timer(ctx.device, ctx.stream());
        model::DitForwardOptions to = fo;
        to.timer = &timer;
        st = ops::fill_uniform(ctx, {.seed = 9, .bound = 1.0f}, *h);
        for (int b = 0; b < blocks && st.ok(); ++b) {
            st = timer.start();
            if (st.ok())
                st = dit.run_block(b, *h, tables->blocks[static_cast<size_t>(b)], *rows, to, *scratch);
        }
        if (st.ok()) st = dit.end_block_pass();
        if (!st.ok()) return report(st);
        auto totals = timer.totals();
        if (!totals.ok()) return report(totals.status());
        phases = std::move(*totals);
        // Attention alone on the last block's own q, k, v (RMS-normed, rotated): the forward's data, timed
        // back to back like the synthetic inputs below, so the two figures separate data from context.
        const int64_t Hh = c.num_attention_heads, hd = c.attention_head_dim;
        auto view = [&](const Tensor& buf) {
            return Tensor::from_storage(buf.storage(), buf.byte_offset(), Shape{S, Hh, hd}, buf.dtype());
        };
        const Tensor fq = view(scratch->q), fk = view(scratch->k), fv = view(scratch->v);
        Tensor fo3 = view(scratch->o);
        const ops::AttentionParams ap{.fp8 = fp8};
        auto time_attention = [&](const std::string& candidate) -> Result<double> {
            auto run = [&] {
                return candidate.empty() ? ops::attention(ctx, ap, fq, fk, fv, fo3)
                                         : ops::attention_candidate(ctx, candidate, ap, fq, fk, fv, fo3);
            };
            H3_TRY(run()); // warm-up
            H3_TRY((*session)->synchronize());
            auto ta = Clock::now();
            for (int i = 0; i < o.iters; ++i) H3_TRY(run());
            H3_TRY((*session)->synchronize());
            return std::chrono::duration<double>(Clock::now() - ta).count() / o.iters;
        };
        auto def = time_attention("");
        if (!def.ok()) return report(def.status());
        attn_forward_data_s = *def;
        if (o.attention_candidates)
            for (const std::string& n : ops::attention_candidates(ctx, ap, fq, fk, fv, fo3)) {
                auto t = time_attention(n);
                attn_forward_candidates.push_back({n, t.ok() ? *t : 0.0});
            }
    }
    const double block_s = pass_s / blocks;
    const size_t block_peak = device_memory_stats().peak;
    // The whole (truncated) forward over a request state: embeddings, the blocks, final norm and heads. The
    // workspace reused (no device allocation per forward) against a fresh one per forward (what every
    // forward paid before), device-resident outputs against host copies.
    // --block-graphs: the device-output forward with every op launched from the host against the same forward
    // replaying each block's recording (model/dit/dit_graphs.h), both the mean of --iters forwards.
    struct ForwardRun {
        std::string name;
        bool reuse = false, on_device = false;
        bool recorded = false; // block recordings (the others launch every op from the host)
        int timed = 1;         // forwards timed (the mean is reported)
        double seconds = 0;
        uint64_t allocations = 0;
        uint64_t recordings = 0, launches = 0, failures = 0;
        size_t nodes = 0;
        std::string record_error;
    };
    auto forward_run = [](const char* name, bool reuse, bool on_device) {
        ForwardRun r;
        r.name = name, r.reuse = reuse, r.on_device = on_device;
        return r;
    };
    std::vector<ForwardRun> forwards = {forward_run("fresh_workspace_host_outputs", false, false),
                                        forward_run("workspace_host_outputs", true, false),
                                        forward_run("workspace_device_outputs", true, true)};
    if (o.block_graphs) {
        forwards.back().timed = o.iters;
        forwards.push_back(forward_run("workspace_device_outputs_recorded", true, true));
        forwards.back().recorded = true;
        forwards.back().timed = o.iters;
    }
    {
        model::DitForwardOptions gfo = fo;
        gfo.parallel = group_dit; // --sp 1: the group's code path on one rank
        auto state = dit.prepare_request(packed, gfo);
        if (!state.ok()) return report(state.status());
        for (ForwardRun& fr : forwards) {
            model::DitForwardOptions ffo = gfo;
            ffo.reuse_workspace = fr.reuse;
            ffo.outputs_on_device = fr.on_device;
            ffo.block_graphs = fr.recorded;
            // Warm-up: sizes the workspace, tunes, plans; recorded blocks are recorded at their second run.
            for (int w = 0; w < (fr.recorded ? 2 : 1); ++w) {
                auto warm = dit.forward(packed, &*tables, ffo, &*state);
                if (!warm.ok()) return report(warm.status());
                if (auto s2 = (*session)->synchronize(); !s2.ok()) return report(s2);
            }
            const uint64_t a0 = device_memory_stats().allocations;
            const auto tf = Clock::now();
            for (int i = 0; i < fr.timed; ++i) {
                auto out = dit.forward(packed, &*tables, ffo, &*state);
                if (!out.ok()) return report(out.status());
            }
            if (auto s2 = (*session)->synchronize(); !s2.ok()) return report(s2);
            fr.seconds = std::chrono::duration<double>(Clock::now() - tf).count() / fr.timed;
            fr.allocations = (device_memory_stats().allocations - a0) / static_cast<uint64_t>(fr.timed);
            if (fr.recorded && state->workspace) {
                const model::DitBlockGraphs& g = state->workspace->graphs;
                fr.recordings = g.recorded, fr.launches = g.launched, fr.failures = g.failed;
                fr.nodes = g.nodes, fr.record_error = g.last_error;
            }
        }
    }
    // Attention alone on the same shape.
    double attn_s = 0;
    {
        const int64_t Hh = c.num_attention_heads, hd = c.attention_head_dim;
        auto q = Tensor::empty(Shape{S, Hh, hd}, dit.act_dtype(), ctx.device);
        auto k = Tensor::empty(Shape{S, Hh, hd}, dit.act_dtype(), ctx.device);
        auto v = Tensor::empty(Shape{S, Hh, hd}, dit.act_dtype(), ctx.device);
        auto out = Tensor::empty(Shape{S, Hh, hd}, dit.act_dtype(), ctx.device);
        if (!q.ok() || !k.ok() || !v.ok() || !out.ok()) return report(internal_error("attention buffers"));
        for (auto* t : {&*q, &*k, &*v}) st = ops::fill_uniform(ctx, {.seed = 5, .bound = 1.0f}, *t);
        const ops::AttentionParams ap{.fp8 = fp8};
        st = ops::attention(ctx, ap, *q, *k, *v, *out); // warm-up
        if (st.ok()) st = (*session)->synchronize();
        if (!st.ok()) return report(st);
        auto ta = Clock::now();
        for (int i = 0; i < o.iters; ++i) st = ops::attention(ctx, ap, *q, *k, *v, *out);
        if (st.ok()) st = (*session)->synchronize();
        if (!st.ok()) return report(st);
        attn_s = std::chrono::duration<double>(Clock::now() - ta).count() / o.iters;
    }
    nlohmann::json vsa_json;
    if (vsa_tiles) {
        VsaScanParams vp{.kept_fractions = o.vsa_scan,
                         .compete = attention->vsa.mode == model::VsaMode::kCompete,
                         .iters = o.iters,
                         .dense_seconds = attn_s};
        auto scan = vsa_attention_scan(**session, c, dit.act_dtype(), *vsa_tiles, vp);
        if (!scan.ok()) return report(scan.status());
        vsa_json = *scan;
    }
    // The link's own H2D rate for one block's streamed bytes.
    const size_t block_bytes = static_cast<size_t>(block_gemm_params(c)) * dtype_size(dit.act_dtype());
    auto pinned_s = h2d_seconds(ctx, block_bytes, true);
    auto pageable_s = h2d_seconds(ctx, block_bytes, false);
    if (!pinned_s.ok()) return report(pinned_s.status());
    if (!pageable_s.ok()) return report(pageable_s.status());
    const double gemm_flops = 2.0 * static_cast<double>(S) * block_gemm_params(c);
    const double attn_flops = 4.0 * static_cast<double>(S) * static_cast<double>(S) * c.inner_dim();
    nlohmann::json j = {
        {"device", ctx.device.to_string()},
        {"dtype", pname},
        {"precision", model::precision_name(prec)},
        {"fp8_fast_accum",
         fp8 && (o.fp8_accum.empty() ? model::DitFp8Options{}.fast_accum : o.fp8_accum == "fast")},
        {"fp8_fused_quantization", fp8 && o.fp8_fused == "on"},
        {"size", o.size},
        {"frames", o.frames},
        {"rows", S},
        {"text_rows", layout.text},
        {"video_rows", layout.video_rows(c)},
        {"audio_rows", 2 * layout.audio},
        {"blocks_timed", blocks},
        {"iters", o.iters},
        {"seconds_per_block", block_s},
        {"seconds_per_forward_50_blocks", block_s * c.num_layers},
        {"useful_tflops", (gemm_flops + attn_flops) / block_s / 1e12},
        {"gemm_tflop_per_block", gemm_flops / 1e12},
        {"attention_tflop_per_block", attn_flops / 1e12},
        {"attention_seconds", attn_s},
        {"attention_tflops", attn_flops / attn_s / 1e12},
        {"attention_seconds_forward_data", attn_forward_data_s},
        {"attention_tflops_forward_data", attn_flops / attn_forward_data_s / 1e12},
        {"weights_bytes_on_device", weight_bytes},
        {"peak_device_bytes", block_peak},
        {"peak_device_gib", static_cast<double>(block_peak) / (1ull << 30)},
        {"peak_device_gib_with_forward", static_cast<double>(device_memory_stats().peak) / (1ull << 30)},
        {"setup_peak_device_gib", static_cast<double>(setup_peak) / (1ull << 30)},
        {"seconds_per_pass", pass_s},
        {"residency", dit.residency_describe()},
        {"plan", choice->describe()},
        {"h2d_link_gbps_pinned", *pinned_s > 0 ? block_bytes / *pinned_s / 1e9 : 0.0},
        {"h2d_link_gbps_pageable", *pageable_s > 0 ? block_bytes / *pageable_s / 1e9 : 0.0},
        {"wall_seconds", total},
        {"gemm_autotune", gemm_autotune(ctx)},
        {"attention", attention->describe()},
    };
    if (vsa_tiles) j["vsa"] = vsa_json;
    if (!attn_forward_candidates.empty()) {
        nlohmann::json cj = nlohmann::json::object();
        for (const auto& [name, secs] : attn_forward_candidates)
            cj[name] = secs > 0 ? attn_flops / secs / 1e12 : 0.0; // 0: the candidate failed
        j["attention_candidates_tflops_forward_data"] = cj;
    }
    if (dit.block_source()) {
        const model::ResidencyStats& rs = timed_stats;
        const double bytes_per_pass = static_cast<double>(rs.h2d_bytes) / o.iters;
        j["h2d_bytes_per_pass"] = bytes_per_pass;
        j["h2d_gbps_during_pass"] = bytes_per_pass / pass_s / 1e9;
        j["uploads_per_pass"] = static_cast<double>(rs.uploads) / o.iters;
        j["sync_loads"] = rs.sync_loads;
        j["dequantized_per_pass"] = static_cast<double>(rs.dequantized) / o.iters;
        j["device_resident_gib"] = static_cast<double>(rs.device_resident_bytes) / (1ull << 30);
        j["device_ring_gib"] = static_cast<double>(rs.device_ring_bytes) / (1ull << 30);
        j["device_staging_gib"] = static_cast<double>(rs.device_staging_bytes) / (1ull << 30);
        j["host_master_gib"] = static_cast<double>(rs.host_master_bytes) / (1ull << 30);
        j["host_pinned_gib"] = static_cast<double>(rs.host_pinned_bytes) / (1ull << 30);
    }
    double gemm_s = 0;
    nlohmann::json per_op = nlohmann::json::object();
    for (const auto& [name, secs] : phases) {
        per_op[name] = secs / blocks;
        if (name.rfind("gemm_", 0) == 0) gemm_s += secs / blocks;
    }
    j["per_op_seconds_per_block"] = per_op;
    j["gemm_seconds_per_block"] = gemm_s;
    j["gemm_tflops"] = gemm_s > 0 ? gemm_flops / gemm_s / 1e12 : 0.0;
    nlohmann::json fj = nlohmann::json::object();
    for (const ForwardRun& fr : forwards) {
        fj[fr.name] = {{"seconds", fr.seconds}, {"device_allocations", fr.allocations}, {"timed", fr.timed}};
        if (fr.recorded)
            fj[fr.name].update({{"block_recordings", fr.recordings},
                                {"recording_launches", fr.launches},
                                {"recording_failures", fr.failures},
                                {"recorded_nodes", fr.nodes},
                                {"recording_error", fr.record_error}});
    }
    j["forward_blocks"] = blocks;
    j["forward"] = fj;
    // Which code path the forwards took: "plain", or the one-rank group's ("ulysses", "ring",
    // "ulysses+ring").
    j["forward_path"] = !group_dit                         ? "plain"
                        : group_dit->sp && group_dit->ring ? "ulysses+ring"
                        : group_dit->ring                  ? "ring"
                                                           : "ulysses";
    if (group_dit && group_dit->sp)
        j["overlap_groups"] = model::ulysses_overlap_groups(
            dit.config().num_attention_heads, group_dit->overlap_groups, group_dit->ring != nullptr);
    if (o.lora_rank > 0) { // last: the merged pass changes the weights for good
        auto rows = dit.build_row_tables(packed, *tables);
        if (!rows.ok()) return report(rows.status());
        auto h = Tensor::empty(Shape{S, D}, dit.act_dtype(), ctx.device);
        if (!h.ok()) return report(h.status());
        // Mean seconds per block over --iters timed passes with these options.
        const BlockTimer time_blocks = [&](const model::DitForwardOptions& opts, model::DitScratch& sc,
                                           bool warm_up) -> Result<double> {
            if (warm_up) { // plans and heuristics for new shapes, untimed
                H3_TRY(ops::fill_uniform(ctx, {.seed = 9, .bound = 1.0f}, *h));
                H3_TRY(dit.run_block(0, *h, tables->blocks[0], *rows, opts, sc));
                H3_TRY((*session)->synchronize());
            }
            std::vector<double> lora_per_block;
            for (int it = 0; it < o.iters; ++it)
                for (int b = 0; b < blocks; ++b) {
                    // Re-randomize the stream each pass so the residual does not grow without bound.
                    if (b == 0) H3_TRY(ops::fill_uniform(ctx, {.seed = 9, .bound = 1.0f}, *h));
                    auto tb = Clock::now();
                    H3_TRY(dit.run_block(b, *h, tables->blocks[static_cast<size_t>(b)], *rows, opts, sc));
                    H3_TRY((*session)->synchronize());
                    lora_per_block.push_back(std::chrono::duration<double>(Clock::now() - tb).count());
                }
            double mean = 0;
            for (double x : lora_per_block) mean += x;
            return mean / static_cast<double>(lora_per_block.size());
        };
        auto lj = bench_dit_lora(dit,
                                 {.rank = o.lora_rank,
                                  .blocks = blocks,
                                  .mode = o.lora_mode,
                                  .rows = S,
                                  .base_seconds_per_block = block_s},
                                 time_blocks);
        if (!lj.ok()) return report(lj.status());
        j["lora"] = *lj;
    }
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf(
            "DiT bench on %s, %s, %lld rows: %.4f s/block, %.2f s per %d-block forward, %.0f TFLOP/s; "
            "GEMM %.0f TFLOP/s; attention %.0f TFLOP/s; peak %.1f GiB; %s\n",
            ctx.device.to_string().c_str(), model::precision_name(prec), static_cast<long long>(S), block_s,
            block_s * c.num_layers, c.num_layers, (gemm_flops + attn_flops) / block_s / 1e12,
            gemm_s > 0 ? gemm_flops / gemm_s / 1e12 : 0.0, attn_flops / attn_s / 1e12,
            static_cast<double>(block_peak) / (1ull << 30),
            dit.block_source() ? timed_stats.summary().c_str() : "resident");
        for (const auto& [name, secs] : phases)
            std::printf("  %-16s %.5f s/block\n", name.c_str(), secs / blocks);
        for (const ForwardRun& fr : forwards) {
            std::printf("  forward (%d blocks, %s path) %-34s %.5f s (mean of %d), %llu device allocations",
                        blocks, j["forward_path"].get<std::string>().c_str(), fr.name.c_str(), fr.seconds,
                        fr.timed, static_cast<unsigned long long>(fr.allocations));
            if (fr.recorded)
                std::printf("; %llu blocks recorded (%zu operations), %llu recording failures%s%s",
                            static_cast<unsigned long long>(fr.recordings), fr.nodes,
                            static_cast<unsigned long long>(fr.failures), fr.record_error.empty() ? "" : ": ",
                            fr.record_error.c_str());
            std::printf("\n");
        }
        if (j.contains("lora")) std::printf("LoRA: %s\n", j["lora"].dump().c_str());
        if (vsa_tiles) {
            std::printf("attention %s: %lld tiles (%lld prefix, %lld video); dense attention %.4f s\n",
                        attention->describe().c_str(), static_cast<long long>(vsa_tiles->num_tiles()),
                        static_cast<long long>(vsa_tiles->num_prefix_tiles),
                        static_cast<long long>(vsa_tiles->num_video_tiles), attn_s);
            for (const auto& r : vsa_json["runs"])
                std::printf(
                    "  kept %.3f (keep %lld, %.3f of tile pairs): sparse %.4f s (%.1f TFLOP/s; mma.sync "
                    "%.4f s, %.1f TFLOP/s; fp8 %.4f s, %.1f TFLOP/s; x%.3f of all tiles, x%.3f of dense), "
                    "selection %.4f s\n",
                    r["kept_fraction"].get<double>(), static_cast<long long>(r["keep"].get<int64_t>()),
                    r["visited_tile_fraction"].get<double>(), r["sparse_attention_seconds"].get<double>(),
                    r["sparse_tflops"].get<double>(), r["mma_seconds"].get<double>(),
                    r["mma_tflops"].get<double>(), r["fp8_seconds"].get<double>(),
                    r["fp8_tflops"].get<double>(), r["vs_all_tiles"].get<double>(),
                    r["vs_dense"].get<double>(), r["select_seconds"].get<double>());
        }
    }
    return kExitOk;
}

// ---- bench vae: the official video decoder over a full tiled decode (or --tiles N tile-clips,
// extrapolated to all of them) and the audio decoder, random weights generated on the device.
struct VaeBenchOptions {
    std::string config = "official", size = "1344x768", device = "cuda", dtype = "f16";
    int frames = 124, tiles = 0, tile_batch = 0;
    bool random_weights = false, json = false, encode = false, reference = false, exact_fp32 = false;
    bool assemble_on_host = false;
    bool sample = false; // time the fp32 sample's decode and download instead of the request's RGB8 frames
    CLI::App* sub = nullptr;
};

// The VAE config the benches use (the official one with unit latent normalization, or --config FILE) and
// the --size canvas checked against its patch size.
Status vae_bench_setup(const VaeBenchOptions& o, model::VideoVaeConfig& vc, int& W, int& H) {
    vc = model::VideoVaeConfig{};
    vc.latents_mean.assign(static_cast<size_t>(vc.latent_channels), 0.0f);
    vc.latents_std.assign(static_cast<size_t>(vc.latent_channels), 1.0f);
    if (o.config != "official") {
        auto r = model::VideoVaeConfig::from_file(o.config);
        if (!r.ok()) return r.status();
        vc = *r;
    }
    if (std::sscanf(o.size.c_str(), "%dx%d", &W, &H) != 2 || W <= 0 || H <= 0 || W % vc.patch || H % vc.patch)
        return invalid_argument("--size '" + o.size + "' must be WxH with multiples of " +
                                std::to_string(vc.patch));
    return ok_status();
}

// bench vae --encode: the video encoder (fp32, random weights made on the device) over one RGB8 keyframe of
// --size, tiled like the reference (256-px tiles, min overlap 64), after one warm-up encode.
int run_bench_vae_encode(const VaeBenchOptions& o) {
    model::VideoVaeConfig vc;
    int W = 0, H = 0;
    if (Status s = vae_bench_setup(o, vc, W, H); !s.ok()) return report(s);
    auto session = DeviceSession::open(o.device);
    if (!session.ok()) return report(session.status());
    const ops::Context& ctx = (*session)->context();
    auto enc = model::random_video_vae_encoder(ctx, vc, 1);
    if (!enc.ok()) return report(enc.status());
    Tensor img = Tensor::host(Shape{H, W, 3}, DType::kU8);
    for (int64_t i = 0; i < img.numel(); ++i)
        img.data_as<uint8_t>()[i] = static_cast<uint8_t>((i * 31) % 256);
    const model::VideoEncodeOptions eo{.tile_batch = o.tile_batch, .tf32 = !o.exact_fp32};
    if (auto r = model::encode_keyframe(ctx, *enc, img, eo); !r.ok()) return report(r.status()); // warm-up
    const auto t0 = Clock::now();
    auto lat = model::encode_keyframe(ctx, *enc, img, eo);
    if (!lat.ok()) return report(lat.status());
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const int tiles =
        static_cast<int>(model::split_tiles(H, eo.tile, eo.min_overlap, vc.patch).starts.size() *
                         model::split_tiles(W, eo.tile, eo.min_overlap, vc.patch).starts.size());
    const double peak = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
    nlohmann::json j = {{"bench", "vae_encode"},
                        {"device", ctx.device.to_string()},
                        {"size", o.size},
                        {"tiles", tiles},
                        {"keyframe_encode_seconds", secs},
                        {"peak_gib", peak},
                        {"latent", lat->shape().to_vector()}};
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("VAE encode bench on %s, %s keyframe (%d tiles): %.3f s, peak %.1f GiB\n",
                    ctx.device.to_string().c_str(), o.size.c_str(), tiles, secs, peak);
    }
    return kExitOk;
}

// bench vae --reference: the ref2va reference encoders (fp32, random weights made on the device) — a --frames
// clip of --size through the video encoder with the seeded-sample recipe, then its soundtrack (stereo,
// frames/24 s at 32 kHz) through the audio encoder (posterior mean) — after one warm-up keyframe encode.
int run_bench_vae_reference(const VaeBenchOptions& o) {
    model::VideoVaeConfig vc;
    int W = 0, H = 0;
    if (Status s = vae_bench_setup(o, vc, W, H); !s.ok()) return report(s);
    if (o.frames < 1 || (o.frames - 5) % 17 != 0)
        return report(invalid_argument("--frames must be of the form 17n+5 for a reference clip"));
    auto session = DeviceSession::open(o.device);
    if (!session.ok()) return report(session.status());
    const ops::Context& ctx = (*session)->context();
    double video_secs = 0, video_peak = 0;
    Tensor lat;
    { // the video encoder is released before the audio one loads
        auto enc = model::random_video_vae_encoder(ctx, vc, 1);
        if (!enc.ok()) return report(enc.status());
        Tensor clip = Tensor::host(Shape{o.frames, H, W, 3}, DType::kU8);
        for (int64_t i = 0; i < clip.numel(); ++i)
            clip.data_as<uint8_t>()[i] = static_cast<uint8_t>((i * 31 + i / (int64_t(W) * H * 3)) % 256);
        const model::VideoEncodeOptions eo{.tile_batch = o.tile_batch, .tf32 = !o.exact_fp32};
        Tensor first = Tensor::host(Shape{H, W, 3}, DType::kU8);
        std::copy_n(clip.data_as<uint8_t>(), first.numel(), first.data_as<uint8_t>());
        if (auto r = model::encode_keyframe(ctx, *enc, first, eo); !r.ok())
            return report(r.status()); // warm-up
        const auto t0 = Clock::now();
        auto post = model::encode_video(ctx, *enc, clip, eo);
        if (!post.ok()) return report(post.status());
        lat = model::sample_normalized_latent(*post, vc, 42);
        video_secs = std::chrono::duration<double>(Clock::now() - t0).count();
        video_peak = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
    }
    model::AudioVaeConfig ac; // official sizes, unit latent normalization
    ac.latents_mean.assign(static_cast<size_t>(ac.latent_channels), 0.0f);
    ac.latents_std.assign(static_cast<size_t>(ac.latent_channels), 1.0f);
    auto aenc = model::random_audio_vae_encoder(ctx, ac, 2);
    if (!aenc.ok()) return report(aenc.status());
    const int64_t samples = static_cast<int64_t>(std::llround(o.frames / 24.0 * ac.sampling_rate));
    Tensor wave = Tensor::host(Shape{2, samples}, DType::kF32);
    for (int64_t i = 0; i < wave.numel(); ++i)
        wave.data_as<float>()[i] = 0.5f * std::sin(0.0123f * static_cast<float>(i % 100003));
    if (auto r = model::encode_audio_mean(ctx, *aenc, wave); !r.ok()) return report(r.status()); // warm-up
    const auto t1 = Clock::now();
    auto mean = model::encode_audio_mean(ctx, *aenc, wave);
    if (!mean.ok()) return report(mean.status());
    const double audio_secs = std::chrono::duration<double>(Clock::now() - t1).count();
    nlohmann::json j = {{"bench", "vae_reference"},
                        {"device", ctx.device.to_string()},
                        {"size", o.size},
                        {"frames", o.frames},
                        {"clip_encode_seconds", video_secs},
                        {"tf32", !o.exact_fp32},
                        {"conv3d", conv3d_backend(ctx)},
                        {"clip_latent", lat.shape().to_vector()},
                        {"clip_peak_gib", video_peak},
                        {"soundtrack_seconds", static_cast<double>(samples) / ac.sampling_rate},
                        {"soundtrack_encode_seconds", audio_secs},
                        {"soundtrack_latent", mean->shape().to_vector()}};
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("ref2va reference encode on %s: %d-frame %s clip %.3f s (peak %.1f GiB), %.2f s stereo "
                    "soundtrack %.3f s\n",
                    ctx.device.to_string().c_str(), o.frames, o.size.c_str(), video_secs, video_peak,
                    static_cast<double>(samples) / ac.sampling_rate, audio_secs);
    }
    return kExitOk;
}

int run_bench_vae(const VaeBenchOptions& o) {
    if (o.reference && o.random_weights) return run_bench_vae_reference(o);
    if (o.encode && o.random_weights) return run_bench_vae_encode(o);
    if (!o.random_weights) {
        std::fprintf(stderr,
                     "h3-engine bench vae: only --random-weights is supported (real weights: decode)\n");
        return kExitUsage;
    }
    model::VideoVaeConfig vc;
    int W = 0, H = 0;
    if (Status s = vae_bench_setup(o, vc, W, H); !s.ok()) return report(s);
    if (o.frames < 5 || (o.frames - 5) % 17)
        return report(invalid_argument("--frames " + std::to_string(o.frames) + " must be 17n+5 (e.g. 124)"));
    const auto compute = parse_dtype(o.dtype);
    if (!compute) return report(invalid_argument("--dtype " + o.dtype + ": f16 | bf16 | f32"));
    auto session = DeviceSession::open(o.device);
    if (!session.ok()) return report(session.status());
    const ops::Context& ctx = (*session)->context();
    auto vae = model::random_video_vae(ctx, vc, *compute, 1);
    if (!vae.ok()) return report(vae.status());
    const int64_t T = (o.frames - 5) / 17 * 5 + 2, lh = H / vc.patch, lw = W / vc.patch;
    const model::ClipPlan plan =
        model::plan_clips(static_cast<int>(T), vc.clip_length, vc.patch_t, vc.token_drop);
    const model::VideoDecodeOptions vopt{.tile_batch = o.tile_batch, .assemble_on_host = o.assemble_on_host};
    const auto ty = model::split_tiles(H, vopt.tile, vopt.min_overlap, vc.patch);
    const auto tx = model::split_tiles(W, vopt.tile, vopt.min_overlap, vc.patch);
    const int total_tiles = static_cast<int>(plan.starts.size() * ty.starts.size() * tx.starts.size());
    auto sync = [&] { return cuda::stream_synchronize(ctx.stream()); };
    double video_s = 0.0;
    int timed_tiles = total_tiles;
    // warm-up: one tile-clip batch of the size the decode uses (cuBLASLt / cuDNN plans, per-shape tables)
    const int batch =
        model::video_tile_batch(vopt, ctx.device, static_cast<int>(ty.starts.size() * tx.starts.size()));
    const int64_t th = std::min<int64_t>(lh, vopt.tile / vc.patch),
                  tw = std::min<int64_t>(lw, vopt.tile / vc.patch);
    std::vector<Tensor> zs;
    for (int b = 0; b < batch; ++b) {
        Tensor z = Tensor::host(Shape{vc.latent_channels, plan.clip_latents, th, tw}, DType::kF32);
        if (auto st = ops::fill_uniform(ops::Context::cpu(), {.seed = 7u + b}, z); !st.ok())
            return report(st);
        zs.push_back(z);
    }
    if (auto r = model::decode_tile_clips(ctx, *vae, zs); !r.ok()) return report(r.status());
    if (o.tiles > 0) {
        timed_tiles = std::min(o.tiles, total_tiles);
        const auto t0 = Clock::now();
        for (int done = 0; done < timed_tiles; done += batch) {
            std::vector<Tensor> part(zs.begin(), zs.begin() + std::min(batch, timed_tiles - done));
            if (auto r = model::decode_tile_clips(ctx, *vae, part); !r.ok()) return report(r.status());
        }
        if (auto st = sync(); !st.ok()) return report(st);
        video_s = std::chrono::duration<double>(Clock::now() - t0).count() * total_tiles / timed_tiles;
    } else {
        Tensor lat = Tensor::host(Shape{1, vc.latent_channels, T, lh, lw}, DType::kF32);
        if (auto st = ops::fill_uniform(ops::Context::cpu(), {.seed = 3}, lat); !st.ok()) return report(st);
        // what a request runs (latents -> u8 frames on the host), or with --sample the fp32 sample's path
        const auto t0 = Clock::now();
        auto decoded = o.sample ? model::decode_video_sample(ctx, *vae, lat, vopt)
                                : model::decode_video_frames(ctx, *vae, lat, vopt);
        if (!decoded.ok()) return report(decoded.status());
        video_s = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    const double video_peak = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
    *vae = model::VideoVae{}; // free the video weights before the audio decoder
    model::AudioVaeConfig ac;
    ac.latents_mean.assign(static_cast<size_t>(ac.latent_channels), 0.0f);
    ac.latents_std.assign(static_cast<size_t>(ac.latent_channels), 1.0f);
    auto avae = model::random_audio_vae(ctx, ac, 1000);
    if (!avae.ok()) return report(avae.status());
    const int64_t A = (static_cast<int64_t>(o.frames) * 40 + 23) / 24; // 40 latents/s at 24 fps
    Tensor alat = Tensor::host(Shape{2, ac.latent_channels, A}, DType::kF32);
    if (auto st = ops::fill_uniform(ops::Context::cpu(), {.seed = 5}, alat); !st.ok()) return report(st);
    if (auto r = model::decode_audio(ctx, *avae, alat); !r.ok()) return report(r.status()); // warm-up
    const auto t1 = Clock::now();
    auto wave = model::decode_audio(ctx, *avae, alat);
    if (!wave.ok()) return report(wave.status());
    const double audio_s = std::chrono::duration<double>(Clock::now() - t1).count();
    const double peak = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
    // the decode's product: RGB8 frames on the host (a request's) or the fp32 sample (--sample); --tiles
    // times decoder calls only
    const char* video_output = o.sample ? "sample" : "rgb8";
    nlohmann::json j = {{"bench", "vae"},
                        {"device", ctx.device.to_string()},
                        {"dtype", o.dtype},
                        {"size", o.size},
                        {"frames", o.frames},
                        {"latent_frames", T},
                        {"tile_clips", total_tiles},
                        {"tile_clips_timed", timed_tiles},
                        {"tile_batch", batch},
                        {"extrapolated", timed_tiles != total_tiles},
                        {"assemble_on_host", o.assemble_on_host},
                        {"video_output", video_output},
                        {"gemm_autotune", gemm_autotune(ctx)},
                        {"video_decode_seconds", video_s},
                        {"seconds_per_tile_clip", video_s / total_tiles},
                        {"video_peak_gib", video_peak},
                        {"audio_latents", A},
                        {"audio_samples", wave->dim(1)},
                        {"audio_decode_seconds", audio_s},
                        {"peak_gib", peak}};
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("VAE bench on %s, %s, %s x %d frames: video to %s %.2f s (%d tile-clips%s, %.4f s each), "
                    "audio %.3f s (%lld latents), peak %.1f GiB\n",
                    ctx.device.to_string().c_str(), o.dtype.c_str(), o.size.c_str(), o.frames,
                    o.sample ? "fp32 sample" : "RGB8 frames", video_s, total_tiles,
                    timed_tiles != total_tiles ? ", extrapolated" : "", video_s / total_tiles, audio_s,
                    static_cast<long long>(A), peak);
    }
    return kExitOk;
}

} // namespace

Command bench_text_command();      // cmd_bench_text.cpp: `bench text`
Command bench_generate_command();  // cmd_bench_generate.cpp: `bench generate`
Command bench_attention_command(); // cmd_bench_attention.cpp: `bench attention`
Command bench_fp8_command();       // cmd_bench_fp8.cpp: `bench fp8`
Command bench_request_command();   // cmd_bench_request.cpp: `bench request`
Command bench_quality_command();   // cmd_bench_quality.cpp: `bench quality`

Command make_bench_command() {
    auto o = std::make_shared<BenchOptions>();
    auto vo = std::make_shared<VaeBenchOptions>();
    auto text = std::make_shared<Command>(bench_text_command());
    auto gen = std::make_shared<Command>(bench_generate_command());
    auto attn = std::make_shared<Command>(bench_attention_command());
    auto fp8c = std::make_shared<Command>(bench_fp8_command());
    auto request = std::make_shared<Command>(bench_request_command());
    auto quality = std::make_shared<Command>(bench_quality_command());
    Command c;
    c.setup = [o, vo, text, gen, attn, fp8c, request, quality](CLI::App& app) {
        o->sub = app.add_subcommand("bench", "Benchmarks (machine-readable with --json)");
        CLI::App* dit = o->sub->add_subcommand("dit", "DiT blocks with random full-width weights");
        o->sub->require_subcommand(1);
        dit->add_option("--config", o->config, "official or a transformer config.json")
            ->capture_default_str();
        dit->add_flag("--random-weights", o->random_weights, "generate random bf16 weights on the device");
        dit->add_option("--size", o->size, "canvas WxH")->capture_default_str();
        dit->add_option("--frames", o->frames, "pixel frames (17n+5)")->capture_default_str();
        dit->add_option("--text", o->text, "conditioner rows")->capture_default_str();
        dit->add_option("--blocks", o->blocks, "blocks to instantiate and time")->capture_default_str();
        dit->add_option("--iters", o->iters, "timed passes over the blocks")->capture_default_str();
        dit->add_flag(
            "--block-graphs", o->block_graphs,
            "also time --iters forwards replaying each block's CUDA graph against --iters with every "
            "op launched from the host");
        dit->add_flag("--attention-candidates", o->attention_candidates,
                      "also time every attention candidate on the last block's own q, k, v");
        dit->add_option("--device", o->device, "cuda | cuda:N | cpu")->capture_default_str();
        dit->add_option("--dtype", o->dtype, "bf16 | fp32 | fp16")
            ->check(CLI::IsMember({"bf16", "fp32", "fp16"}))
            ->capture_default_str();
        add_residency_flags(dit, o->residency);
        dit->add_option("--precision", o->precision,
                        "fp8: the blocks' GEMMs and attention in e4m3 (Hopper), else --dtype decides")
            ->check(CLI::IsMember({"bf16", "fp8", "fp32"}));
        dit->add_option("--fp8-accum", o->fp8_accum,
                        "with --precision fp8: exact | fast (cuBLASLt's fast fp8 accumulation); default: the "
                        "model's default (DitFp8Options::fast_accum)")
            ->check(CLI::IsMember({"exact", "fast"}));
        dit->add_option("--fp8-fused", o->fp8_fused,
                        "with --precision fp8: on | off (the norms and SwiGLU write the GEMMs' e4m3 rows)")
            ->check(CLI::IsMember({"on", "off"}))
            ->capture_default_str();
        dit->add_option("--attention", o->attention,
                        "dense | vsa[:sparsity=0.9,mode=exempt|compete,...] (VSA: FastH3 blocks with their "
                        "compression gates, plus the sparse attention alone at the --vsa-scan fractions)")
            ->capture_default_str();
        dit->add_option("--vsa-scan", o->vsa_scan, "kept fractions of the video key tiles to time (VSA)")
            ->delimiter(',')
            ->capture_default_str();
        dit->add_flag("--json", o->json, "JSON output");
        dit->add_option("--sp", o->sp,
                        "1: the forwards through the device group's Ulysses code path on one rank")
            ->check(CLI::Range(1, 1024));
        dit->add_option("--tp", o->tp, "1 (accepted with --sp 1; the tp path is not timed at one rank)")
            ->check(CLI::Range(1, 1024));
        dit->add_option("--ring", o->ring, "1: the forwards through the ring-attention code path on one rank")
            ->check(CLI::Range(1, 1024));
        dit->add_option("--overlap-groups", o->overlap_groups,
                        "with --sp 1: Ulysses head groups overlapped with their all-to-alls (0 auto, 1 off)")
            ->check(CLI::Range(0, 1024))
            ->capture_default_str();
        dit->add_option(
               "--lora-rank", o->lora_rank,
               "also time random rank-R adapters on q/k/v/out/FFN of every block: applied at run time "
               "and merged into the weights")
            ->check(CLI::Range(int64_t{1}, int64_t{4096}));
        dit->add_option("--lora-mode", o->lora_mode, "runtime | merged | both")
            ->check(CLI::IsMember({"runtime", "merged", "both"}))
            ->capture_default_str();
        text->setup(*o->sub);
        attn->setup(*o->sub);
        fp8c->setup(*o->sub);
        gen->setup(*o->sub);
        request->setup(*o->sub);
        quality->setup(*o->sub);
        CLI::App* vae =
            o->sub->add_subcommand("vae", "video + audio VAE decoders with random full-width weights");
        vae->add_option("--config", vo->config, "official or a vae config.json")->capture_default_str();
        vae->add_flag("--random-weights", vo->random_weights, "generate random weights on the device");
        vae->add_option("--size", vo->size, "canvas WxH")->capture_default_str();
        vae->add_option("--frames", vo->frames, "pixel frames (17n+5)")->capture_default_str();
        vae->add_option("--tiles", vo->tiles, "time only N tile-clips and extrapolate (0: the full decode)")
            ->capture_default_str();
        vae->add_option("--tile-batch", vo->tile_batch, "tile-clips per decoder call (0: default)")
            ->capture_default_str();
        vae->add_option("--dtype", vo->dtype, "ViT block precision f16 | bf16 | f32")
            ->check(CLI::IsMember({"f16", "bf16", "f32"}))
            ->capture_default_str();
        vae->add_option("--device", vo->device, "cuda | cuda:N | cpu")->capture_default_str();
        vae->add_flag("--encode", vo->encode, "time the video encoder on one --size keyframe instead");
        vae->add_flag(
            "--reference", vo->reference,
            "time the ref2va reference encoders instead: a --frames clip of --size (video encoder) and "
            "its stereo soundtrack (audio encoder)");
        vae->add_flag(
            "--exact-fp32", vo->exact_fp32,
            "encoder convolutions in exact fp32 instead of TF32 tensor cores (--encode, --reference)");
        vae->add_flag(
            "--assemble-on-host", vo->assemble_on_host,
            "stitch and cross-fade the decoded tiles on the host (the former path, for comparison)");
        vae->add_flag("--sample", vo->sample,
                      "time the decode to the fp32 sample on the host (the former product, 4x the bytes "
                      "downloaded) instead of a request's RGB8 frames");
        vae->add_flag("--json", vo->json, "JSON output");
        vo->sub = vae;
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o, vo, text, gen, attn, fp8c, request, quality]() -> int {
        if (vo->sub && vo->sub->parsed()) return run_bench_vae(*vo);
        if (gen->parsed()) return gen->run();
        if (attn->parsed()) return attn->run();
        if (fp8c->parsed()) return fp8c->run();
        if (request->parsed()) return request->run();
        if (quality->parsed()) return quality->run();
        return text->parsed() ? text->run() : run_bench(*o);
    };
    return c;
}

} // namespace h3::cli
