// bench dit --lora-rank R: the same DiT blocks with random rank-R adapters on q/k/v/out/FFN, applied at run
// time (y += s·(x·Aᵀ)·Bᵀ after each projection) and merged into the weights, against the plain blocks.
#pragma once

#include "core/status.h"
#include "model/dit/dit_model.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace h3::bench {

// Mean seconds per block over the bench's timed passes (warm_up: one untimed block first).
using BlockTimer =
    std::function<Result<double>(const model::DitForwardOptions&, model::DitScratch&, bool warm_up)>;

struct BenchLoraParams {
    int64_t rank = 128;
    int blocks = 0;
    std::string mode = "both"; // runtime | merged | both
    int64_t rows = 0;          // sequence rows (scratch size)
    double base_seconds_per_block = 0;
};

// Runs the runtime pass, then (the merge is permanent) the merged pass; returns their figures.
Result<nlohmann::json> bench_dit_lora(model::DitModel& dit, const BenchLoraParams& p, const BlockTimer& time);

} // namespace h3::bench
