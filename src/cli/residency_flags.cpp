#include "cli/residency_flags.h"

namespace h3::cli {

runtime::WeightPolicy ResidencyFlags::policy() const {
    return {.residency = residency,
            .resident_blocks = resident_blocks,
            .weight_dtype = weight_dtype,
            .host_pinning = host_pinning != "off",
            .gpu_memory_budget = gpu_memory_budget,
            .int8_cache = int8_cache};
}

void add_residency_flags(CLI::App* sub, ResidencyFlags& f) {
    CLI::App* g = sub->add_option_group("Memory", "where the weights live (docs/residency.md)");
    g->add_option(
         "--residency", f.residency,
         "DiT blocks' and text layers' weights: resident | layerwise (streamed); default resident, or "
         "the planner's under --gpu-memory-budget")
        ->check(CLI::IsMember({"resident", "layerwise"}));
    g->add_option("--resident-blocks", f.resident_blocks,
                  "layerwise: DiT blocks kept on the device (default 0, or the planner's)")
        ->check(CLI::NonNegativeNumber);
    g->add_option("--weight-dtype", f.weight_dtype,
                  "bf16 (default) | int8 (W8A16, quantized at load) | auto (int8 where the budget needs it)")
        ->check(CLI::IsMember({"bf16", "int8", "auto"}));
    g->add_option("--host-pinning", f.host_pinning, "page-lock streamed weights' host masters: on | off")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    g->add_option(
        "--gpu-memory-budget", f.gpu_memory_budget,
        "device memory to fit in (e.g. 24GiB): the planner picks residency and int8 (default none)");
    g->add_option("--int8-cache", f.int8_cache, "folder for the quantized int8 masters (default none)");
}

} // namespace h3::cli
