// The multi-GPU flag family `generate` and `serve` share, in the "Multi-GPU" option group: --sp N (Ulysses),
// --ring R (ring attention), --tp N (tensor parallel), --gpus 0,1,... (one CUDA device per rank); generate's
// --launch. They are h3::EngineOptions' sp / ring / tp / gpus; the engine checks them against the DiT.
#pragma once

#include "core/device.h"
#include "core/status.h"
#include "runtime/placement.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace h3::cli {

struct ParallelFlags {
    int sp = 1, tp = 1, ring = 1;
    std::string gpus;            // "0,1,2,3"
    std::string launch = "auto"; // generate: auto | threads | processes (cli/spawn_ranks.h)
};
// `launch` (generate): --launch too, the ranks of this host as threads of this process or as child processes
// (auto: processes when --gpus names several CUDA devices, else threads).
void add_parallel_flags(CLI::App* sub, ParallelFlags& flags, bool launch = false);
// Whether `generate` should re-run itself once per rank (not when this process already is a launched rank).
bool wants_rank_processes(const ParallelFlags& flags, const Device& device, bool launched);
// "0,1,2" as device indices (field "gpus").
Result<std::vector<int>> parse_gpus(const std::string& text);
// Several gpus for ranks that would be threads of this process (they share one device): refused, the
// message naming the flag and `instead` (what to run).
Status check_ranks_in_process(const runtime::PlacementPlan& plan, const std::string& instead);

} // namespace h3::cli
