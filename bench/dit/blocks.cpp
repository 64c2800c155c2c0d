#include "bench/dit/blocks.h"

#include "core/cuda_api.h"
#include "core/phase_timer.h"
#include "ops/ops.h"

#include <chrono>

namespace h3::bench {

namespace {
using Clock = std::chrono::steady_clock;
} // namespace

Result<BlockState> make_block_state(const DitBench& b, const model::DitForwardOptions& fo) {
    const model::DitModel& dit = *b.dit;
    H3_ASSIGN_OR_RETURN(model::DitModel::RowTables rows, dit.build_row_tables(b.packed, b.tables));
    rows.vsa = b.vsa_tiles.get();
    const int64_t S = b.rows(), D = b.config.hidden_size;
    H3_ASSIGN_OR_RETURN(Tensor h, Tensor::empty(Shape{S, D}, dit.residual_dtype(), b.ctx().device));
    H3_TRY(ops::fill_uniform(b.ctx(), {.seed = 9, .bound = 1.0f}, h));
    H3_ASSIGN_OR_RETURN(model::DitScratch scratch, dit.make_scratch(S, fo.ffn_chunk_bytes));
    return BlockState{std::move(rows), std::move(h), std::move(scratch)};
}

Result<BlockTimings> time_block_passes(DitBench& b, BlockState& st, const model::DitForwardOptions& fo,
                                       int iters) {
    model::DitModel& dit = *b.dit;
    const ops::Context& ctx = b.ctx();
    auto pass = [&]() -> Status {
        H3_TRY(ops::fill_uniform(ctx, {.seed = 9, .bound = 1.0f}, st.residual)); // keeps the residual bounded
        for (int i = 0; i < b.blocks; ++i)
            H3_TRY(dit.run_block(i, st.residual, b.tables.blocks[static_cast<size_t>(i)], st.rows, fo,
                                 st.scratch));
        H3_TRY(dit.end_block_pass());
        return b.session->synchronize();
    };
    BlockTimings t;
    H3_TRY(pass());
    t.setup_peak = device_memory_stats().peak;
    reset_device_memory_peak();
    if (dit.block_source()) dit.block_source()->reset_counters();
    const auto t0 = Clock::now();
    for (int it = 0; it < iters; ++it) H3_TRY(pass());
    t.total_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    t.pass_seconds = t.total_seconds / iters;
    if (dit.block_source()) t.stats = dit.block_source()->stats();
    // Per-op device time: one more pass with events between the ops (no syncs inside the pass).
    PhaseTimer timer(ctx.device, ctx.stream());
    model::DitForwardOptions to = fo;
    to.timer = &timer;
    H3_TRY(ops::fill_uniform(ctx, {.seed = 9, .bound = 1.0f}, st.residual));
    for (int i = 0; i < b.blocks; ++i) {
        H3_TRY(timer.start());
        H3_TRY(
            dit.run_block(i, st.residual, b.tables.blocks[static_cast<size_t>(i)], st.rows, to, st.scratch));
    }
    H3_TRY(dit.end_block_pass());
    H3_ASSIGN_OR_RETURN(t.phases, timer.totals());
    return t;
}

Result<double> mean_block_seconds(DitBench& b, const model::DitForwardOptions& fo, model::DitScratch& sc,
                                  bool warm_up, int iters) {
    model::DitModel& dit = *b.dit;
    const ops::Context& ctx = b.ctx();
    H3_ASSIGN_OR_RETURN(model::DitModel::RowTables rows, dit.build_row_tables(b.packed, b.tables));
    H3_ASSIGN_OR_RETURN(Tensor h,
                        Tensor::empty(Shape{b.rows(), b.config.hidden_size}, dit.act_dtype(), ctx.device));
    if (warm_up) { // plans and heuristics for new shapes, untimed
        H3_TRY(ops::fill_uniform(ctx, {.seed = 9, .bound = 1.0f}, h));
        H3_TRY(dit.run_block(0, h, b.tables.blocks[0], rows, fo, sc));
        H3_TRY(b.session->synchronize());
    }
    double sum = 0;
    int64_t count = 0;
    for (int it = 0; it < iters; ++it)
        for (int i = 0; i < b.blocks; ++i) {
            // Re-randomize the stream each pass so the residual does not grow without bound.
            if (i == 0) H3_TRY(ops::fill_uniform(ctx, {.seed = 9, .bound = 1.0f}, h));
            const auto t0 = Clock::now();
            H3_TRY(dit.run_block(i, h, b.tables.blocks[static_cast<size_t>(i)], rows, fo, sc));
            H3_TRY(b.session->synchronize());
            sum += std::chrono::duration<double>(Clock::now() - t0).count();
            ++count;
        }
    return sum / static_cast<double>(count);
}

} // namespace h3::bench
