// h3-bench dit --config official|CONFIG.json --random-weights [--size WxH] [--frames F] [--text L]
//               [--blocks N] [--device cuda] [--dtype bf16|fp32|fp16] [--precision fp8] [--iters K]
//               [--fp8-accum exact|fast] [--fp8-fused on|off]
//               [--block-graphs] [--attention-candidates]
//               [--json]
//               [--residency resident|layerwise] [--resident-blocks K] [--weight-dtype bf16|int8|auto]
//               [--host-pinning on|off] [--gpu-memory-budget SIZE]
//               [--lora-rank R [--lora-mode runtime|merged|both]]
//               [--attention dense|vsa[:sparsity=0.9,mode=exempt]] [--vsa-scan 0.1,0.25,0.5,1]
//               [--sp 1 --tp 1 [--ring 1]]   (the forwards through the device group's code path on one
//                                             rank: its overhead against the same bench without them)
// Times DiT blocks with random full-width weights generated on the device (dit/setup.h): seconds per block
// and per 50-block forward, useful TFLOP/s, per-op time (dit/blocks.h), attention TFLOP/s on the forward's
// own q, k, v and on random ones of the same shape (dit/attention.h), whole forwards (dit/forward.h), peak
// device memory, and with streamed blocks the bytes uploaded per pass, the rate they arrived at during the
// pass, the link's own H2D rate (dit/h2d_link.h) and the plan; with --attention vsa the kept-fraction scan
// (dit/vsa_scan.h), with --lora-rank run-time and merged adapters (dit/lora.h). Reported by dit/report.h.
#include "bench/commands.h"
#include "bench/dit/attention.h"
#include "bench/dit/blocks.h"
#include "bench/dit/forward.h"
#include "bench/dit/h2d_link.h"
#include "bench/dit/lora.h"
#include "bench/dit/report.h"
#include "bench/dit/vsa_scan.h"
#include "core/cuda_api.h"
#include "pipeline/provenance_json.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace h3::bench {

namespace {

void add_dit_flags(CLI::App* dit, DitBenchOptions& o) {
    dit->add_option("--config", o.config, "official or a transformer config.json")->capture_default_str();
    dit->add_flag("--random-weights", o.random_weights, "generate random bf16 weights on the device");
    dit->add_option("--size", o.size, "canvas WxH")->capture_default_str();
    dit->add_option("--frames", o.frames, "pixel frames (17n+5)")->capture_default_str();
    dit->add_option("--text", o.text, "conditioner rows")->capture_default_str();
    dit->add_option("--blocks", o.blocks, "blocks to instantiate and time")->capture_default_str();
    dit->add_option("--iters", o.iters, "timed passes over the blocks")->capture_default_str();
    dit->add_flag("--block-graphs", o.block_graphs,
                  "also time --iters forwards replaying each block's CUDA graph against --iters with every "
                  "op launched from the host");
    dit->add_flag("--attention-candidates", o.attention_candidates,
                  "also time every attention candidate on the last block's own q, k, v");
    dit->add_option("--device", o.device, "cuda | cuda:N | cpu")->capture_default_str();
    dit->add_option("--dtype", o.dtype, "bf16 | fp32 | fp16")
        ->check(CLI::IsMember({"bf16", "fp32", "fp16"}))
        ->capture_default_str();
    add_residency_flags(dit, o.residency);
    dit->add_option("--precision", o.precision,
                    "fp8: the blocks' GEMMs and attention in e4m3 (Hopper), else --dtype decides")
        ->check(CLI::IsMember({"bf16", "fp8", "fp32"}));
    dit->add_option("--fp8-accum", o.fp8_accum,
                    "with --precision fp8: exact | fast (cuBLASLt's fast fp8 accumulation); default: the "
                    "model's default (DitFp8Options::fast_accum)")
        ->check(CLI::IsMember({"exact", "fast"}));
    dit->add_option("--fp8-fused", o.fp8_fused,
                    "with --precision fp8: on | off (the norms and SwiGLU write the GEMMs' e4m3 rows)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    dit->add_option("--attention", o.attention,
                    "dense | vsa[:sparsity=0.9,mode=exempt|compete,...] (VSA: FastH3 blocks with their "
                    "compression gates, plus the sparse attention alone at the --vsa-scan fractions)")
        ->capture_default_str();
    dit->add_flag("--vsa-variants", o.vsa_variants,
                  "VSA: also time the sparse kernels the engine does not pick (the wgmma kernel with 3 or 4 "
                  "K/V stages; bf16 and e4m3)");
    dit->add_option("--vsa-scan", o.vsa_scan, "kept fractions of the video key tiles to time (VSA)")
        ->delimiter(',')
        ->capture_default_str();
    dit->add_flag("--json", o.json, "JSON output");
    dit->add_option("--sp", o.sp, "1: the forwards through the device group's Ulysses code path on one rank")
        ->check(CLI::Range(1, 1024));
    dit->add_option("--tp", o.tp, "1 (accepted with --sp 1; the tp path is not timed at one rank)")
        ->check(CLI::Range(1, 1024));
    dit->add_option("--ring", o.ring, "1: the forwards through the ring-attention code path on one rank")
        ->check(CLI::Range(1, 1024));
    dit->add_option("--overlap-groups", o.overlap_groups,
                    "with --sp 1: Ulysses head groups overlapped with their all-to-alls (0 auto, 1 off)")
        ->check(CLI::Range(0, 1024))
        ->capture_default_str();
    dit->add_option("--lora-rank", o.lora_rank,
                    "also time random rank-R adapters on q/k/v/out/FFN of every block: applied at run time "
                    "and merged into the weights")
        ->check(CLI::Range(int64_t{1}, int64_t{4096}));
    dit->add_option("--lora-mode", o.lora_mode, "runtime | merged | both")
        ->check(CLI::IsMember({"runtime", "merged", "both"}))
        ->capture_default_str();
}

Result<nlohmann::json> run_dit_bench(const DitBenchOptions& o) {
    ops::ProvenanceRecord provenance; // the kernels the timed forwards ran ("kernels" in the JSON)
    const ops::ProvenanceScope provenance_scope(&provenance);
    H3_ASSIGN_OR_RETURN(DitBench b, make_dit_bench(o));
    model::DitForwardOptions fo;
    fo.attention = b.attention;
    DitBenchResults r;
    { // the blocks' state is released before the whole forwards run
        H3_ASSIGN_OR_RETURN(BlockState state, make_block_state(b, fo));
        H3_ASSIGN_OR_RETURN(r.blocks, time_block_passes(b, state, fo, o.iters));
        H3_ASSIGN_OR_RETURN(r.forward_data_attention,
                            time_forward_data_attention(b, state, o.iters, o.attention_candidates));
    }
    r.block_peak = device_memory_stats().peak;
    H3_ASSIGN_OR_RETURN(r.forwards, time_forwards(b, fo, o.iters, o.block_graphs));
    H3_ASSIGN_OR_RETURN(r.attention_seconds, time_synthetic_attention(b, o.iters));
    if (b.vsa_tiles) {
        const VsaScanParams vp{.kept_fractions = o.vsa_scan,
                               .compete = b.attention.vsa.mode == model::VsaMode::kCompete,
                               .iters = o.iters,
                               .dense_seconds = r.attention_seconds,
                               .variants = o.vsa_variants};
        H3_ASSIGN_OR_RETURN(r.vsa,
                            vsa_attention_scan(*b.session, b.config, b.dit->act_dtype(), *b.vsa_tiles, vp));
    }
    r.h2d_block_bytes = static_cast<size_t>(block_gemm_params(b.config)) * dtype_size(b.dit->act_dtype());
    H3_ASSIGN_OR_RETURN(r.h2d_pinned_seconds, h2d_seconds(b.ctx(), r.h2d_block_bytes, true));
    H3_ASSIGN_OR_RETURN(r.h2d_pageable_seconds, h2d_seconds(b.ctx(), r.h2d_block_bytes, false));
    nlohmann::json j = dit_report_json(b, o, r);
    if (o.lora_rank > 0) { // last: the merged pass changes the weights for good
        const BlockTimer time_blocks = [&](const model::DitForwardOptions& opts, model::DitScratch& sc,
                                           bool warm_up) {
            return mean_block_seconds(b, opts, sc, warm_up, o.iters);
        };
        H3_ASSIGN_OR_RETURN(j["lora"],
                            bench_dit_lora(*b.dit,
                                           {.rank = o.lora_rank,
                                            .blocks = b.blocks,
                                            .mode = o.lora_mode,
                                            .rows = b.rows(),
                                            .base_seconds_per_block = r.blocks.pass_seconds / b.blocks},
                                           time_blocks));
    }
    pipeline::add_provenance(j, provenance);
    if (o.json)
        std::printf("%s\n", j.dump(2).c_str());
    else
        print_dit_report(b, r, j);
    return j;
}

} // namespace

Command dit_command() {
    auto o = std::make_shared<DitBenchOptions>();
    auto sub = std::make_shared<CLI::App*>(nullptr);
    Command c;
    c.setup = [o, sub](CLI::App& app) {
        *sub = app.add_subcommand("dit", "DiT blocks with random full-width weights");
        add_dit_flags(*sub, *o);
    };
    c.parsed = [sub] { return *sub && (*sub)->parsed(); };
    c.run = [o]() -> int {
        if (!o->random_weights) {
            std::fprintf(
                stderr, "h3-bench dit: only --random-weights is supported (real weights: `h3-engine dit`)\n");
            return kExitUsage;
        }
        auto r = run_dit_bench(*o);
        return r.ok() ? kExitOk : report(r.status());
    };
    return c;
}

} // namespace h3::bench
