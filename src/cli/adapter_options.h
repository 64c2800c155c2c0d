// generate's adapter and few-step options: --lora FILE[:SCALE] (repeatable), --lora-mode merged|runtime,
// --lora-strict, --lora-qkv-rows, --preset NAME, --video-shift, --audio-shift.
#pragma once

#include "core/status.h"
#include "model/dit/dit_model.h"
#include "model/lora/lora_file.h"
#include "model/lora/lora_set.h"
#include "ops/context.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

namespace h3::cli {

struct AdapterCliOptions {
    std::vector<std::string> lora; // FILE[:SCALE]
    std::string lora_mode = "merged";
    bool lora_strict = false;
    std::string qkv_rows = "auto";
    std::string preset;
    double video_shift = 0, audio_shift = 0;
};

void add_adapter_options(CLI::App* sub, AdapterCliOptions& o);

// "FILE[:SCALE]": the text after the last ':' is the scale when it is a number, else part of the file name.
struct LoraSpec {
    std::string path;
    float strength = 1.0f;
};
Result<LoraSpec> parse_lora_spec(const std::string& text);

// steps / shifts in order of precedence: explicit --steps / --video-shift / --audio-shift, then --preset,
// then what the caller already holds (the checkpoint's scheduler configs, the default 50 steps).
Status apply_schedule_options(const CLI::App& sub, const AdapterCliOptions& o, int& steps,
                              double& video_shift, double& audio_shift);

// Reads every --lora file for `config` (before any weight is loaded) and reports what each holds.
Result<std::vector<model::LoraUse>> read_lora_options(const AdapterCliOptions& o,
                                                      const model::DitConfig& config);

// Merged mode: folds the adapters into the model's weights (returns null). Runtime mode: places them on the
// device as the set every forward applies (the caller passes it in DenoiseOptions::lora).
Result<std::shared_ptr<const model::LoraSet>> attach_lora_options(const AdapterCliOptions& o,
                                                                  const std::vector<model::LoraUse>& uses,
                                                                  model::DitModel& model);

} // namespace h3::cli
