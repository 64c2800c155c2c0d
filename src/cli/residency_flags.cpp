#include "cli/residency_flags.h"

#include "runtime/model_store.h"

namespace h3::cli {

using model::Residency;
using model::WeightFormat;

void add_residency_flags(CLI::App* sub, ResidencyFlags& f) {
    sub->add_option("--residency", f.residency,
                    "where the DiT blocks' (and text layers') weights live: resident (all on the device) | "
                    "layerwise (host masters streamed through a ring of device slots); default resident, or "
                    "the planner's choice under --gpu-memory-budget")
        ->check(CLI::IsMember({"resident", "layerwise"}));
    sub->add_option(
           "--resident-blocks", f.resident_blocks,
           "layerwise: keep the first K DiT blocks on the device (default 0, or the planner's choice)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--weight-dtype", f.weight_dtype,
                    "bf16 (the --dtype's own weights, default) | int8 (W8A16: symmetric per output channel, "
                    "quantized at load) | auto (int8 only where the budget needs it)")
        ->check(CLI::IsMember({"bf16", "int8", "auto"}));
    sub->add_option("--host-pinning", f.host_pinning,
                    "page-lock the host masters of streamed weights: on (default) | off (pageable: slower "
                    "uploads that block the host, so one more ring slot is kept in flight; pinning the whole "
                    "model can exhaust a host)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    sub->add_option(
        "--gpu-memory-budget", f.gpu_memory_budget,
        "device memory the engine may use (e.g. 24GiB): the planner picks resident / layerwise(K) "
        "/ int8 per component to fit and says what it chose; a budget that cannot be met is an "
        "error before any weight moves");
    sub->add_option("--int8-cache", f.int8_cache,
                    "folder for the quantized int8 masters (written once per checkpoint, then read back as a "
                    "shared mapping)");
}

std::string ResidencyChoice::describe() const {
    if (plan) return plan->text;
    return "weights: DiT " + dit.describe() + "; text encoder " + text.describe();
}

runtime::Workload workload_for(int64_t video_rows, int64_t audio_rows, int64_t text_rows, int steps,
                               int cache_buffers, int width, int height) {
    runtime::Workload w;
    w.width = width;
    w.height = height;
    w.dit_rows = video_rows + audio_rows + text_rows;
    w.text_rows = text_rows;
    w.schedule_points = steps;
    w.cache_buffers = cache_buffers;
    return w;
}

Result<ResidencyChoice> resolve_residency(const ResidencyFlags& f,
                                          const std::vector<runtime::ComponentBytes>& comps,
                                          bool keep_between_jobs) {
    if (f.resident_blocks >= 0 && f.residency == "resident")
        return invalid_argument("--resident-blocks applies to --residency layerwise, not resident");
    const bool pin = f.host_pinning != "off";
    // A pageable upload blocks the host until it is done and waits for the slot's last reader first, so it
    // refills a slot freed one block earlier: one more slot in flight keeps the device busy meanwhile.
    const int depth = pin ? 1 : 2;
    ResidencyChoice ch;
    ch.dit.pin_host = ch.text.pin_host = pin;
    ch.dit.prefetch_depth = ch.text.prefetch_depth = depth;
    ch.dit.int8_cache_dir = ch.text.int8_cache_dir = f.int8_cache;
    if (f.gpu_memory_budget.empty()) {
        if (f.weight_dtype == "auto")
            return invalid_argument(
                "--weight-dtype auto lets the planner choose: give --gpu-memory-budget too");
        const bool layerwise = f.residency == "layerwise" || (f.residency.empty() && f.resident_blocks >= 0);
        ch.dit.mode = ch.text.mode = layerwise ? Residency::kLayerwise : Residency::kResident;
        ch.dit.resident_layers = std::max(0, f.resident_blocks);
        ch.dit.format = f.weight_dtype == "int8" ? WeightFormat::kInt8 : WeightFormat::kNative;
        for (const auto& c : comps)
            if (c.hot && layerwise && ch.dit.resident_layers > c.layers)
                return invalid_argument("--resident-blocks " + std::to_string(ch.dit.resident_layers) +
                                        " exceeds the DiT's " + std::to_string(c.layers) + " blocks");
        return ch;
    }
    H3_ASSIGN_OR_RETURN(uint64_t budget, runtime::parse_byte_size(f.gpu_memory_budget));
    runtime::PlanOptions po;
    po.budget = budget;
    if (!f.residency.empty())
        po.residency = f.residency == "layerwise" ? Residency::kLayerwise : Residency::kResident;
    if (f.resident_blocks >= 0) {
        po.residency = Residency::kLayerwise;
        po.resident_layers = f.resident_blocks;
    }
    if (f.weight_dtype == "bf16") po.format = WeightFormat::kNative;
    if (f.weight_dtype == "int8") po.format = WeightFormat::kInt8;
    po.allow_int8 = f.weight_dtype == "auto" || f.weight_dtype == "int8";
    po.keep_between_jobs = keep_between_jobs;
    po.prefetch_depth = depth;
    auto planned = runtime::plan_memory(comps, po);
    if (!planned.ok()) return planned.status().with_context("--gpu-memory-budget " + f.gpu_memory_budget);
    runtime::MemoryPlan plan = std::move(planned).value();
    for (const runtime::ComponentPlan& cp : plan.components) {
        model::ResidencyOptions r = cp.residency;
        r.pin_host = pin;
        r.prefetch_depth = depth;
        r.int8_cache_dir = f.int8_cache;
        if (cp.name == "transformer") ch.dit = r;
        if (cp.name == "text_encoder") ch.text = r;
    }
    ch.plan = std::move(plan);
    return ch;
}

Result<runtime::ComputePrecision> compute_precision(const std::string& dtype, const std::string& precision) {
    if (precision == "fp8") {
        if (dtype != "bf16")
            return invalid_argument("--precision fp8 needs --dtype bf16 (fp8 is a bf16-model option)");
        return runtime::ComputePrecision::kFp8;
    }
    if (!precision.empty() && precision != "bf16")
        return invalid_argument("--precision '" + precision + "' must be bf16 or fp8");
    if (dtype == "fp32") return runtime::ComputePrecision::kFp32;
    if (dtype == "fp16") return runtime::ComputePrecision::kFp16;
    if (dtype == "bf16") return runtime::ComputePrecision::kDefault;
    return invalid_argument("--dtype '" + dtype + "' must be bf16, fp16 or fp32");
}

Result<ResidencyChoice> resolve_checkpoint_residency(const ResidencyFlags& f, const std::string& root,
                                                     runtime::ComputePrecision precision,
                                                     const runtime::Workload& workload, bool ref2va,
                                                     bool serving) {
    std::vector<runtime::ComponentBytes> comps;
    if (!f.gpu_memory_budget.empty()) {
        H3_ASSIGN_OR_RETURN(
            comps, runtime::checkpoint_component_bytes(root, runtime::dit_precision(precision), workload,
                                                       ref2va ? "transformer_ref" : "transformer"));
    }
    if (precision == runtime::ComputePrecision::kFp8) {
        H3_ASSIGN_OR_RETURN(ResidencyChoice ch, resolve_residency(f, comps, serving));
        if (!ch.dit.plain())
            return invalid_argument(
                "--precision fp8 keeps its e4m3 block weights resident: the DiT cannot be " +
                ch.dit.describe() + " (drop --precision fp8, or the residency flags)");
        return ch;
    }
    return resolve_residency(f, comps, serving);
}

void apply_residency(const ResidencyChoice& ch, runtime::PlacementPlan& plan, bool serving) {
    using runtime::Component;
    plan[Component::kTransformer].weights = ch.dit;
    plan[Component::kTransformerRef].weights = ch.dit;
    plan[Component::kTextEncoder].weights = ch.text;
    if (!ch.plan) return;
    plan.memory_plan = ch.plan->text;
    for (const runtime::ComponentPlan& cp : ch.plan->components)
        for (Component c : runtime::kAllComponents) {
            const bool match = cp.name == runtime::component_name(c) ||
                               (cp.name == "transformer" && c == Component::kTransformerRef);
            if (!match) continue;
            if (c != Component::kTransformer && c != Component::kTransformerRef &&
                c != Component::kTextEncoder) {
                plan[c].weights = cp.residency;
                plan[c].weights.pin_host = ch.dit.pin_host;
            }
            if (serving)
                plan[c].residency = cp.kept ? runtime::Residency::kResident : runtime::Residency::kPerJob;
        }
}

} // namespace h3::cli
