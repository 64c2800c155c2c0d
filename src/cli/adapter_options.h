// generate's adapter and few-step options: --lora FILE[:SCALE] (repeatable), --lora-mode merged|runtime,
// --lora-strict, --lora-qkv-rows, --preset NAME, --video-shift, --audio-shift.
#pragma once

#include "core/status.h"
#include "model/dit/dit_config.h"
#include "model/lora/lora_file.h"
#include "model/lora/lora_set.h"
#include "pipeline/job_lora.h"

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

// The flags as the job builder's fields (pipeline::LoraJobInput): lora, lora_mode, lora_strict, preset and
// the shifts (only those given: the builder applies explicit > preset > checkpoint).
Status adapter_flags_to_input(const CLI::App& sub, const AdapterCliOptions& o, pipeline::LoraJobInput& in);

// The read options of --lora-strict and --lora-qkv-rows.
model::LoraReadOptions lora_read_options(const AdapterCliOptions& o);

// Merged mode: reads every --lora file for `config` (before any weight is loaded) and reports what each
// holds; the model store merges them into its DiT when it loads (runtime::ModelStore::set_merged_adapters).
Result<std::vector<model::LoraUse>> read_lora_options(const AdapterCliOptions& o,
                                                      const model::DitConfig& config);

} // namespace h3::cli
