// The placement policy: an engine's weight and precision options (h3::EngineOptions: residency,
// resident_blocks, weight_dtype, host_pinning, gpu_memory_budget, int8_cache; dtype, precision) resolved
// into the DiT's and the text stack's residency — as given, or chosen by the memory planner
// (runtime/memory_plan.h) when a budget is set — and written into the PlacementPlan a ModelStore follows.
// Errors are invalid_argument with Status::field the option's name; no front end's spelling appears.
#pragma once

#include "runtime/component_sizes.h"
#include "runtime/memory_plan.h"
#include "runtime/placement.h"

#include <optional>
#include <string>
#include <vector>

namespace h3::runtime {

struct WeightPolicy {
    std::string residency;         // "" | resident | layerwise
    int resident_blocks = -1;      // -1: not given
    std::string weight_dtype;      // "" | bf16 | int8 | auto
    bool host_pinning = true;      // page-lock the host masters of streamed weights
    std::string gpu_memory_budget; // "" | SIZE ("24GiB")
    std::string int8_cache;        // folder for quantized masters ("" : quantize at every load)
    bool budgeted() const { return !gpu_memory_budget.empty(); }
};

struct ResidencyChoice {
    model::ResidencyOptions dit, text;
    std::optional<MemoryPlan> plan; // when a budget was given
    std::string describe() const;   // the plan's text, or the DiT's and text stack's placements
};

// Without a budget: the policy as given (the DiT; the text stack follows `residency` with K = 0 and keeps its
// native weights). With a budget: the planner over `components` (the DiT forced to what the policy gives).
Result<ResidencyChoice> resolve_residency(const WeightPolicy& policy,
                                          const std::vector<ComponentBytes>& components,
                                          bool keep_between_jobs = false);

// The planner's workload for a request of `video_rows` video, `audio_rows` (both channels) audio and
// `text_rows` conditioner rows with `steps` grid points and a step cache keeping `cache_buffers` buffers, on
// a `width`×`height` canvas (the defaults: the release shape, Workload{}).
Workload workload_for(int64_t video_rows, int64_t audio_rows, int64_t text_rows, int steps, int cache_buffers,
                      int width = Workload{}.width, int height = Workload{}.height);

// dtype bf16|fp32|fp16 and precision bf16|fp8 as a placement's precision (fields "dtype", "precision").
Result<ComputePrecision> compute_precision(const std::string& dtype, const std::string& precision);

// resolve_residency for checkpoint `root`: with a budget, every component's bytes from the configs for
// `workload` (the DiT variant `ref2va` picks), in `precision`. `serving`: components may stay loaded
// between jobs. A budget that cannot be met is an error here, before any weight moves.
Result<ResidencyChoice> resolve_checkpoint_residency(const WeightPolicy& policy, const std::string& root,
                                                     ComputePrecision precision, const Workload& workload,
                                                     bool ref2va, bool serving);

// Writes `choice` into `plan`: both DiTs' and the text stack's weights; with a budget every planned
// component's weights, and for a server (`serving`) the components the planner does not keep between jobs
// become per job (the others resident). The planner's text goes to plan.memory_plan.
void apply_residency(const ResidencyChoice& choice, PlacementPlan& plan, bool serving);

} // namespace h3::runtime
