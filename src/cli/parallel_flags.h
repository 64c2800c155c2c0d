// The device-group flags `generate` and `serve` share (issue #17): --sp N (sequence parallel, Ulysses),
// --ring R (ring attention across R Ulysses groups), --tp N (tensor parallel), --gpus 0,1,... (one CUDA
// device per rank, sp·ring·tp of them); into PlacementPlan::parallel, checked
// against the checkpoint's DiT (its heads must split over sp·tp) before any weight loads.
#pragma once

#include "model/dit/dit_config.h"
#include "runtime/placement.h"

#include <CLI/CLI.hpp>

#include <string>

namespace h3::cli {

struct ParallelFlags {
    int sp = 1, tp = 1, ring = 1;
    std::string gpus;            // "0,1,2,3"
    std::string launch = "auto"; // generate: auto | threads | processes (cli/spawn_ranks.h)
};
void add_parallel_flags(CLI::App* sub, ParallelFlags& flags);
// generate's --launch: the ranks of this host as threads of this process or as child processes (auto:
// processes when --gpus names several CUDA devices, else threads).
void add_launch_flag(CLI::App* sub, ParallelFlags& flags);
// Whether `generate` should re-run itself once per rank (not when this process already is a launched rank).
bool wants_rank_processes(const ParallelFlags& flags, const Device& device, bool launched);
// Fills plan.parallel (one rank with one --gpus entry: the components' CUDA device becomes that GPU);
// errors name the flag.
Status apply_parallel_flags(const ParallelFlags& flags, runtime::PlacementPlan& plan);
// Several --gpus for ranks that would be threads of this process (they share one device): refused, the
// message naming the flag and `instead` (what to run).
Status check_ranks_in_process(const runtime::PlacementPlan& plan, const std::string& instead);
// The checkpoint's DiT against the plan (null: no DiT in the checkpoint, nothing to check).
Status check_parallel_flags(const runtime::PlacementPlan& plan, const model::DitConfig* dit);

} // namespace h3::cli
