// Work accounting of one request: per step what ran (blocks, hits, probes, seconds, one-time work) and the
// totals of
// useful work — executed GEMM and attention FLOPs only (h3-model.md §14); skipped blocks and probes do
// not count.
#pragma once

#include "core/one_time_work.h"
#include "model/dit/dit_config.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace h3::cache {

struct StepRecord {
    int step = 0;
    bool dit_call = true;
    bool cache_hit = false;
    bool refreshed = false; // a refresh hint reset the cache before this step
    int blocks_executed = 0;
    int blocks_skipped = 0;
    int64_t probe_elements = 0; // elements read by the decision (relL1 inputs, probe modulation)
    double diff = -1;           // the decision's distance, −1 when none was computed
    double local_diff = -1;     // a device group's rank: its own rows' distance (diff is the group's)
    std::string reason;         // why the policy decided so ("warmup", "similar", "window", ...)
    double seconds = 0;
    double useful_flops = 0;
    // What the step did once that a later step of the same shape does not do again (core/one_time_work.h;
    // a device group's ranks together); all zero when nothing counted it.
    OneTimeWork one_time;
};

// One-time work as JSON: {gemm_tunings, gemm_tuning_seconds, attention_plans, attention_plan_seconds,
// workspace_allocations, workspace_bytes, graph_recordings, graph_recording_seconds}.
nlohmann::json one_time_json(const OneTimeWork& w);

// GEMM (2·S·P_blk, P_blk = 4·D·I + 3·D·F) and attention (4·S²·I) FLOPs of one DiT block over S rows.
double block_flops(const model::DitConfig& config, int64_t rows);

// A FLOP rate in human units: "34 TFLOP/s", "896 MFLOP/s", "1.25 GFLOP/s".
std::string format_flops_rate(double flops_per_second);

struct WorkReport {
    std::string cache = "none";
    std::vector<StepRecord> steps;
    double setup_seconds = 0;
    // A device group's run: the ranks, and each rank's share of the useful FLOPs (the steps' useful_flops
    // are the group's total).
    int ranks = 1;
    std::vector<double> rank_useful_flops;

    int dit_calls() const;
    int cache_hits() const;
    int64_t blocks_executed() const;
    int64_t blocks_skipped() const;
    double useful_flops() const;
    double seconds() const;
    double useful_tflops_per_s() const;
    // The steps' one-time work summed.
    OneTimeWork one_time() const;
    nlohmann::json to_json() const;
    // "steps 49, DiT calls 34, cache hits 15, blocks run 1,722/2,450, 512 TFLOP/s"
    std::string summary() const;
};

} // namespace h3::cache
