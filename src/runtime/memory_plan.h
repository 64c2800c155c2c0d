// The device memory budget planner: a pure function from component byte sizes (computed from the configs,
// runtime/component_sizes.h), a device budget and the user's forced choices to one placement per component —
// resident, layerwise with K resident layers, int8 — and the text that says what it chose. "Cannot fit" is
// an error before any weight moves.
//
// Model: a job runs in stages (conditioning, encode, denoise, decode). A component is either kept on the
// device between jobs (the server's hot DiT) or loaded for its stage only (per job). A stage's peak is the
// sum of every kept component's weights, the weights of its own per-job components and the largest working
// set among its components. The DiT (the hot component, 2·steps forwards per job) is placed first at the
// best placement whose stages all fit with every other component at its smallest placement; the others are
// then raised, one by one in order, to the best placement that still fits.
#pragma once

#include "core/status.h"
#include "model/weights/residency.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace h3::runtime {

enum class Stage { kConditioning, kEncode, kDenoise, kDecode };
const char* stage_name(Stage s);

struct ComponentBytes {
    std::string name; // "transformer", "text_encoder", "vision_tower", "vae_decoder", "audio_vae_decoder"
    Stage stage = Stage::kDenoise;
    uint64_t fixed = 0;          // always on the device while loaded (globals, norms, embeddings)
    int layers = 0;              // identical streamable layers (0: the component is not layered)
    uint64_t layer = 0;          // bytes of one layer's streamed matrices in the native dtype
    uint64_t layer_int8 = 0;     // the same as int8 + f32 row scales (0: no int8 form)
    uint64_t resident_extra = 0; // on the device only when resident (the DiT's AdaLN projections)
    uint64_t working = 0;        // activations and scratch of its stage
    bool hot = false;            // placed first (the DiT)
};

enum class Choice { kAuto, kForced };

struct PlanOptions {
    uint64_t budget = 0; // device bytes available to the engine
    // Forced placement of the hot component (--residency / --resident-blocks / --weight-dtype).
    std::optional<model::Residency> residency{};
    std::optional<int> resident_layers{};
    std::optional<model::WeightFormat> format{}; // nullopt: native unless int8 is the only way to fit
    bool allow_int8 = false;                     // may the planner pick int8 by itself
    int prefetch_depth = 1;
    bool keep_between_jobs = false; // a server: components may stay loaded between jobs
};

struct ComponentPlan {
    std::string name;
    Stage stage = Stage::kDenoise;
    bool kept = false;                 // on the device between jobs; false: loaded for its stage
    model::ResidencyOptions residency; // mode, resident_layers, format (prefetch depth from the options)
    uint64_t device_bytes = 0;         // weights on the device while loaded (ring and staging included)
    uint64_t working = 0;
};

struct MemoryPlan {
    std::vector<ComponentPlan> components;
    std::vector<std::pair<Stage, uint64_t>> stage_peaks;
    uint64_t peak = 0;
    std::string text; // one line per component, then the stage peaks
    const ComponentPlan* find(const std::string& name) const;
};

// Bytes of `c` on the device under `r` (ring: min(depth + 1, streamed layers) slots; int8: one native
// staging layer).
uint64_t placement_bytes(const ComponentBytes& c, const model::ResidencyOptions& r);

Result<MemoryPlan> plan_memory(const std::vector<ComponentBytes>& components, const PlanOptions& options);

// "24GiB", "24 GiB", "80GB", "512MiB", "1.5TiB", or plain bytes; errors name `field` (Status::field too).
Result<uint64_t> parse_byte_size(const std::string& text, const std::string& field = "gpu_memory_budget");
std::string format_bytes(uint64_t bytes); // "23.51 GiB", "12.00 MiB", "64.00 KiB"

} // namespace h3::runtime
