#include "bench/dit/setup.h"

#include "bench/synthetic_layout.h"
#include "core/cuda_api.h"
#include "model/dit/dit_fp8.h"

#include <algorithm>
#include <cstdio>

namespace h3::bench {

namespace {

// --sp 1 --tp 1 [--ring 1]: a DeviceGroup of one rank whose DiT view takes the sequence-parallel code path
// (size-1 communicators: the shard copy, Ulysses' packing and all-to-alls, the final all_gather, the cache
// probe's all-reduce; with --ring 1 the ring's all_gathers, lse attention and merges). tp stays unwired: a
// one-rank tp path would copy every block's weights into a shard.
Result<std::unique_ptr<runtime::DeviceGroup>> one_rank_group(const DitBenchOptions& o,
                                                             const ops::Context& ctx) {
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

} // namespace

double block_gemm_params(const model::DitConfig& c) {
    const double D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim;
    return 3 * D * I + I * D + 2 * F * D + F * D;
}

Result<DitBench> make_dit_bench(const DitBenchOptions& o) {
    DitBench b;
    // defaults are the official config (test_dit_tensors checks them against the file)
    if (o.config != "official") {
        H3_ASSIGN_OR_RETURN(b.config, model::DitConfig::from_file(o.config));
    }
    const model::DitConfig& c = b.config;
    H3_ASSIGN_OR_RETURN(b.layout, synthetic_layout(o.size, o.frames, o.text));
    if (o.sp > 1 || o.tp > 1 || o.ring > 1) return one_rank_group(o, ops::Context::cpu()).status();
    H3_ASSIGN_OR_RETURN(b.session, DeviceSession::open(o.device));
    const ops::Context& ctx = b.ctx();
    auto group = one_rank_group(o, ctx);
    if (!group.ok()) return group.status().with_context("bench dit --sp/--tp/--ring");
    b.group = std::move(group).value();
    b.precision_text = o.precision.empty() ? o.dtype : o.precision; // --precision wins over --dtype
    H3_ASSIGN_OR_RETURN(b.precision, model::parse_precision(b.precision_text,
                                                            o.precision.empty() ? "--dtype" : "--precision"));
    b.blocks = std::max(1, std::min(o.blocks, c.num_layers));
    H3_ASSIGN_OR_RETURN(b.attention, model::parse_attention_choice(o.attention));
    // VSA runs a FastH3 student: every block carries its compression gate.
    // Placement of the `blocks` blocks: as the flags say, or planned for the budget.
    model::DitConfig truncated =
        c; // the model holds `blocks` blocks (a truncated DiT: its forward runs them all)
    truncated.num_layers = b.blocks;
    const runtime::Workload wl =
        workload_for(b.layout.video_rows(c), 2 * b.layout.audio, b.layout.text, 2, 0);
    H3_ASSIGN_OR_RETURN(
        b.placement,
        resolve_residency(o.residency, {runtime::dit_component_bytes(truncated, b.precision, wl)}));
    if (!o.json) std::fprintf(stderr, "bench dit: %s\n", b.placement.describe().c_str());
    const bool streamed = !b.placement.dit.plain();
    reset_device_memory_peak();
    H3_ASSIGN_OR_RETURN(model::DitWeights weights,
                        model::random_dit_weights(c, ctx, b.precision,
                                                  {.blocks = b.blocks,
                                                   .adaln = false,
                                                   .gate_compress = b.attention.is_vsa(),
                                                   .seed = 1,
                                                   .host_blocks = streamed,
                                                   .pinned = b.placement.dit.pin_host}));
    std::unique_ptr<model::LayerWeightSource> source;
    if (streamed) {
        if (b.fp8())
            return invalid_argument("--precision fp8 keeps its e4m3 block weights resident; drop it or "
                                    "use --residency resident --weight-dtype bf16");
        H3_ASSIGN_OR_RETURN(source, model::make_dit_block_source(weights, b.precision, b.placement.dit, ctx));
    }
    if (b.fp8()) { // every timed block in e4m3 (the default exceptions name the last of 50 blocks)
        model::DitFp8Options f8{.bf16_layers = {}};
        if (!o.fp8_accum.empty()) f8.fast_accum = o.fp8_accum == "fast";
        f8.fused_quantization = o.fp8_fused == "on";
        H3_TRY(model::quantize_dit_fp8(ctx, truncated, f8, weights));
    }
    b.dit =
        std::make_unique<model::DitModel>(truncated, std::move(weights), b.precision, ctx, std::move(source));
    b.packed = model::synthetic_inputs(c, b.layout, 0.3f, 0.55f, 2);
    H3_ASSIGN_OR_RETURN(
        b.tables, model::random_adaln_tables(c, ctx, b.dit->act_dtype(), b.packed.timesteps, b.blocks, 3));
    if (b.attention.is_vsa()) {
        H3_ASSIGN_OR_RETURN(b.vsa_tiles, b.dit->prepare_vsa_tiles(b.packed));
    }
    b.weight_bytes = device_memory_stats().current;
    return b;
}

} // namespace h3::bench
