// `bench dit`'s attention figures: attention alone on the last block's own q, k, v (RMS-normed, rotated: the
// forward's data) and, with --attention-candidates, every candidate on them; and attention alone on random
// q, k, v of the same shape. Both back to back after a warm-up call, so the two figures separate the data's
// effect from the forward's context.
#pragma once

#include "bench/dit/blocks.h"

#include <string>
#include <utility>
#include <vector>

namespace h3::bench {

struct ForwardDataAttention {
    double seconds = 0;                                     // the default implementation
    std::vector<std::pair<std::string, double>> candidates; // seconds of each (0: it failed)
};
Result<ForwardDataAttention> time_forward_data_attention(const DitBench& b, BlockState& state, int iters,
                                                         bool every_candidate);

// Seconds per call on random q, k, v of the forward's shape.
Result<double> time_synthetic_attention(const DitBench& b, int iters);

} // namespace h3::bench
