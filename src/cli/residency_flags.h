// The weight residency flags `generate`, `serve` and `bench dit|generate|text` share: --residency,
// --resident-blocks, --weight-dtype, --host-pinning, --gpu-memory-budget, --int8-cache; their resolution into
// the DiT's and the text stack's placements — as given, or chosen by the memory planner
// (runtime/memory_plan.h) when a budget is set — and into a runtime::PlacementPlan the ModelStore follows.
#pragma once

#include "model/dit/dit_weights.h"
#include "runtime/component_sizes.h"
#include "runtime/memory_plan.h"
#include "runtime/placement.h"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace h3::cli {

struct ResidencyFlags {
    std::string residency;    // "" | resident | layerwise
    int resident_blocks = -1; // -1: not given
    std::string weight_dtype; // "" | bf16 | int8 | auto
    std::string host_pinning = "on";
    std::string gpu_memory_budget; // "" | SIZE
    std::string int8_cache;        // folder for quantized masters ("" : quantize at every load)
};
void add_residency_flags(CLI::App* sub, ResidencyFlags& flags);

struct ResidencyChoice {
    model::ResidencyOptions dit, text;
    std::optional<runtime::MemoryPlan> plan; // when --gpu-memory-budget was given
    std::string describe() const;            // the plan's text, or the DiT's and text stack's placements
};

// Without a budget: the flags as given (the DiT; the text stack follows --residency with K = 0 and keeps
// its native weights). With a budget: the planner over `components` (the DiT forced to what the flags give).
// Errors name the flag.
Result<ResidencyChoice> resolve_residency(const ResidencyFlags& flags,
                                          const std::vector<runtime::ComponentBytes>& components,
                                          bool keep_between_jobs = false);

// The planner's workload for a request of `video_rows` video, `audio_rows` (both channels) audio and
// `text_rows` conditioner rows with `steps` grid points and a step cache keeping `cache_buffers` buffers,
// on a `width`×`height` canvas.
runtime::Workload workload_for(int64_t video_rows, int64_t audio_rows, int64_t text_rows, int steps,
                               int cache_buffers, int width = 1344, int height = 768);

// ---- onto the seam (generate, serve)

// --dtype bf16|fp32|fp16 and --precision bf16|fp8 as the placement's precision; errors name the flag.
Result<runtime::ComputePrecision> compute_precision(const std::string& dtype, const std::string& precision);

// resolve_residency for checkpoint `root`: with a budget, every component's bytes from the configs for
// `workload` (the DiT variant `ref2va` picks), in `precision`. `serving`: components may stay loaded
// between jobs. A budget that cannot be met is an error here, before any weight moves.
Result<ResidencyChoice> resolve_checkpoint_residency(const ResidencyFlags& flags, const std::string& root,
                                                     runtime::ComputePrecision precision,
                                                     const runtime::Workload& workload, bool ref2va,
                                                     bool serving);

// Writes `choice` into `plan`: both DiTs' and the text stack's weights; with a budget every planned
// component's weights, and for a server (`serving`) the components the planner does not keep between jobs
// become per job (the others resident). The planner's text goes to plan.memory_plan.
void apply_residency(const ResidencyChoice& choice, runtime::PlacementPlan& plan, bool serving);

} // namespace h3::cli
