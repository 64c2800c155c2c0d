// `bench dit`'s block timing: the blocks run back to back with one synchronization per pass (so streamed
// blocks overlap their uploads with compute as in a forward), after one untimed warm-up pass (plans,
// heuristics, GEMM algorithm timing; a streamed model also fills its ring); then one more pass with events
// between the ops for the per-op device time.
#pragma once

#include "bench/dit/setup.h"

#include <string>
#include <utility>
#include <vector>

namespace h3::bench {

// What one pass over the blocks runs on: the row tables, the residual stream and the forward's scratch
// (after the per-op pass its q, k, v hold the last block's: attention.h times attention on them).
struct BlockState {
    model::DitModel::RowTables rows;
    Tensor residual;
    model::DitScratch scratch;
};
Result<BlockState> make_block_state(const DitBench& b, const model::DitForwardOptions& fo);

struct BlockTimings {
    double total_seconds = 0;                           // the timed passes
    double pass_seconds = 0;                            // per pass
    size_t setup_peak = 0;                              // peak device bytes after the warm-up pass
    model::ResidencyStats stats;                        // the block source's counters over the timed passes
    std::vector<std::pair<std::string, double>> phases; // per-op seconds summed over one pass of the blocks
};
Result<BlockTimings> time_block_passes(DitBench& b, BlockState& state, const model::DitForwardOptions& fo,
                                       int iters);

// Mean seconds per block over `iters` passes, each block synchronized and timed alone, with `fo` and the
// scratch `sc` (the LoRA comparisons); warm_up: one untimed block first (plans for new shapes).
Result<double> mean_block_seconds(DitBench& b, const model::DitForwardOptions& fo, model::DitScratch& sc,
                                  bool warm_up, int iters);

} // namespace h3::bench
