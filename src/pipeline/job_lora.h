// LoRA adapters and few-step schedules on the seam: the job builder's input fields (lora, lora_mode,
// lora_strict, preset, video_shift, audio_shift) and what a GenerationJob carries for them. Run-time adapters
// are resolved by the builder through a runtime::AdapterLibrary (loaded once, cached, shared by the jobs that
// name them) into the set the Generator hands to the denoiser (DenoiseOptions::lora); merged adapters are the
// model store's (runtime::ModelStore::set_merged_adapters), fixed for the process, and a job names them only
// to be checked against them. Errors start with the field name.
#pragma once

#include "core/status.h"
#include "model/lora/lora_set.h"
#include "runtime/adapter_library.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace h3::pipeline {

struct GenerationJob;

struct LoraInput {
    std::string path;   // generate: a file; serve: a name inside --lora-dir
    double scale = 1.0; // 0 leaves the adapter out
};

// Adapters one job may name: each is a low-rank product in every adapted projection of every step, so the
// list is bounded like any other size a client declares (a long list of one cached file would otherwise turn
// a small body into hours of denoising).
inline constexpr size_t kMaxJobAdapters = 16;

// JobInput::adapters.
struct LoraJobInput {
    std::vector<LoraInput> lora = {};
    std::optional<std::string> lora_mode = {}; // runtime (default) | merged
    std::optional<bool> lora_strict = {};      // unknown adapter keys are an error instead of skipped
    std::optional<std::string> preset = {};    // few-step schedule (pipeline/few_step_presets.h)
    std::optional<double> video_shift = {},
                          audio_shift = {}; // explicit shifts win over preset and checkpoint
};

enum class LoraMode { kRuntime, kMerged };
const char* lora_mode_name(LoraMode m); // "runtime", "merged"

// GenerationJob::adapters.
struct JobAdapters {
    std::vector<runtime::AdapterUse> uses;
    LoraMode mode = LoraMode::kRuntime;
    std::shared_ptr<const model::LoraSet>
        set;            // run time: the combined set of `uses` (null when none applies)
    std::string preset; // "" when none
    bool empty() const { return uses.empty(); }
    // "path:scale" per use: how merged sets are named and compared.
    std::vector<std::string> names() const;
};

// "path:scale" as JobAdapters::names() and the merged store spell them.
std::string lora_use_name(const std::string& path, double scale);

// Where the builder resolves adapters.
struct LoraResolver {
    runtime::AdapterLibrary* library = nullptr; // run-time adapters (null: a run-time lora is refused)
    std::vector<std::string> merged = {}; // the store's merged set (runtime::ModelStore::merged_adapters)
};

// The checks that need no checkpoint (at most kMaxJobAdapters, paths given, scales finite, mode, preset name,
// shifts positive).
Status check_lora_input(const LoraJobInput& in, std::string* field);
// Steps (when num_inference_steps was not given), shifts and adapters into `job` (whose steps and shifts hold
// the request's or the checkpoint's values already).
Status apply_lora_input(const LoraJobInput& in, bool steps_given, const LoraResolver& resolver,
                        GenerationJob& job, std::string* field);

} // namespace h3::pipeline
