// The model & device flag family (--model, --device, --dtype, --precision, --vae-precision) in the "Model &
// device" option
// group, and the translation of every engine flag family (this one, cli/residency_flags.h "Memory",
// cli/parallel_flags.h "Multi-GPU", cli/adapter_options.h "LoRA") into one h3::EngineOptions.
#pragma once

#include "cli/adapter_options.h"
#include "cli/parallel_flags.h"
#include "cli/residency_flags.h"

#include <CLI/CLI.hpp>

#include <h3/engine.h>

#include <string>

namespace h3::cli {

struct ModelFlags {
    std::string model, device = EngineOptions{}.device, dtype = EngineOptions{}.dtype,
                       precision = EngineOptions{}.precision, vae_precision = EngineOptions{}.vae_precision;
};
struct ModelFlagsSpec {
    std::string model_help = "checkpoint root (either layout) or transformer folder";
    bool model_required = false;
    bool precision = true;     // --precision (the DiTs')
    bool vae_precision = true; // --vae-precision (the video decoder's)
};
void add_model_flags(CLI::App* sub, ModelFlags& flags, const ModelFlagsSpec& spec = {});

// The flag families as engine options (any of the families but the model's may be absent).
Result<EngineOptions> engine_options(const ModelFlags& model, const ResidencyFlags* memory,
                                     const ParallelFlags* parallel, const AdapterCliOptions* adapters);

} // namespace h3::cli
