// The LoRA flag family, in the "LoRA" option group: --lora FILE[:SCALE] (repeatable), --lora-mode
// merged|runtime, --lora-strict, --lora-qkv-rows; and generate's few-step fields --preset, --video-shift,
// --audio-shift. The adapters are h3::EngineOptions' (lora, lora_mode, lora_strict, lora_qkv_rows); the
// preset and the shifts are job fields.
#pragma once

#include "core/status.h"

#include <CLI/CLI.hpp>

#include <h3/engine.h>

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
Result<LoraOption> parse_lora_spec(const std::string& text);

// The adapters as engine options.
Status adapter_engine_options(const AdapterCliOptions& o, EngineOptions& options);
// The preset and the shifts (only those given: the builder applies explicit > preset > checkpoint).
void adapter_job_fields(const CLI::App& sub, const AdapterCliOptions& o, JobRequest& request);

} // namespace h3::cli
