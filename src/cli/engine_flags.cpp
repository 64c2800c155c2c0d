#include "cli/engine_flags.h"

namespace h3::cli {

void add_model_flags(CLI::App* sub, ModelFlags& f, const ModelFlagsSpec& spec) {
    CLI::App* g = sub->add_option_group("Model & device", "the checkpoint and where it runs");
    auto* model = g->add_option("--model", f.model, spec.model_help);
    if (spec.model_required) model->required();
    g->add_option("--device", f.device, "cpu | cuda | cuda:N")->capture_default_str();
    g->add_option("--dtype", f.dtype, "bf16 | fp32 | fp16 (GPUs without bf16)")
        ->check(CLI::IsMember({"bf16", "fp32", "fp16"}))
        ->capture_default_str();
    if (spec.precision)
        g->add_option("--precision", f.precision, "DiT precision: bf16 | fp8 (lossy, e4m3; H100/H200)")
            ->check(CLI::IsMember({"bf16", "fp8"}))
            ->capture_default_str();
    if (spec.vae_precision)
        g->add_option("--vae-precision", f.vae_precision,
                      "video decoder precision: auto (fp8 under --precision fp8, else exact) | exact (the "
                      "reference's f16 blocks) | bf16 (bf16 blocks: GEMMs and attention) | fp8 (e4m3 block "
                      "GEMMs); bf16 and fp8 are lossy and faster (H100/H200)")
            ->check(CLI::IsMember({"auto", "exact", "bf16", "fp8"}))
            ->capture_default_str();
}

Result<EngineOptions> engine_options(const ModelFlags& model, const ResidencyFlags* memory,
                                     const ParallelFlags* parallel, const AdapterCliOptions* adapters) {
    EngineOptions o;
    o.checkpoint = model.model;
    o.device = model.device;
    o.dtype = model.dtype;
    o.precision = model.precision;
    o.vae_precision = model.vae_precision;
    if (memory) {
        o.residency = memory->residency;
        o.resident_blocks = memory->resident_blocks;
        o.weight_dtype = memory->weight_dtype;
        o.host_pinning = memory->host_pinning != "off";
        o.gpu_memory_budget = memory->gpu_memory_budget;
        o.int8_cache = memory->int8_cache;
    }
    if (parallel) {
        o.sp = parallel->sp;
        o.tp = parallel->tp;
        o.ring = parallel->ring;
        H3_ASSIGN_OR_RETURN(o.gpus, parse_gpus(parallel->gpus));
    }
    if (adapters) H3_TRY(adapter_engine_options(*adapters, o));
    return o;
}

} // namespace h3::cli
