// The memory flag family (`generate`, `serve`, `bench dit|generate|text|request`), in the "Memory" option
// group: --residency, --resident-blocks, --weight-dtype, --host-pinning, --gpu-memory-budget, --int8-cache.
// They are h3::EngineOptions' memory options; the policy that resolves them is runtime/placement_policy.h.
#pragma once

#include "runtime/placement_policy.h"

#include <CLI/CLI.hpp>

#include <string>

namespace h3::cli {

struct ResidencyFlags {
    std::string residency;    // "" | resident | layerwise
    int resident_blocks = -1; // -1: not given
    std::string weight_dtype; // "" | bf16 | int8 | auto
    std::string host_pinning = "on";
    std::string gpu_memory_budget; // "" | SIZE
    std::string int8_cache;        // folder for quantized masters ("" : quantize at every load)
    runtime::WeightPolicy policy() const;
};
void add_residency_flags(CLI::App* sub, ResidencyFlags& flags);

// runtime::resolve_residency over the flags (benches that size one component themselves).
inline Result<runtime::ResidencyChoice> resolve_residency(const ResidencyFlags& flags,
                                                          const std::vector<runtime::ComponentBytes>& comps) {
    return runtime::resolve_residency(flags.policy(), comps);
}
using runtime::workload_for;

} // namespace h3::cli
