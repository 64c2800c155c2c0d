#include "runtime/placement_policy.h"

#include "runtime/model_store.h"

#include <algorithm>

namespace h3::runtime {

using model::WeightFormat;

std::string ResidencyChoice::describe() const {
    if (plan) return plan->text;
    return "weights: DiT " + dit.describe() + "; text encoder " + text.describe();
}

Workload workload_for(int64_t video_rows, int64_t audio_rows, int64_t text_rows, int steps, int cache_buffers,
                      int width, int height) {
    Workload w;
    w.width = width;
    w.height = height;
    w.dit_rows = video_rows + audio_rows + text_rows;
    w.text_rows = text_rows;
    w.schedule_points = steps;
    w.cache_buffers = cache_buffers;
    return w;
}

Result<ResidencyChoice> resolve_residency(const WeightPolicy& f, const std::vector<ComponentBytes>& comps,
                                          bool keep_between_jobs) {
    if (!f.residency.empty() && f.residency != "resident" && f.residency != "layerwise")
        return invalid_field("residency", "residency '" + f.residency + "' must be resident or layerwise");
    if (!f.weight_dtype.empty() && f.weight_dtype != "bf16" && f.weight_dtype != "int8" &&
        f.weight_dtype != "auto")
        return invalid_field("weight_dtype",
                             "weight_dtype '" + f.weight_dtype + "' must be bf16, int8 or auto");
    if (f.resident_blocks >= 0 && f.residency == "resident")
        return invalid_field("resident_blocks",
                             "resident_blocks applies to residency layerwise, not resident");
    const bool pin = f.host_pinning;
    // A pageable upload blocks the host until it is done and waits for the slot's last reader first, so it
    // refills a slot freed one block earlier: one more slot in flight keeps the device busy meanwhile.
    const int depth = pin ? 1 : 2;
    ResidencyChoice ch;
    ch.dit.pin_host = ch.text.pin_host = pin;
    ch.dit.prefetch_depth = ch.text.prefetch_depth = depth;
    ch.dit.int8_cache_dir = ch.text.int8_cache_dir = f.int8_cache;
    if (f.gpu_memory_budget.empty()) {
        if (f.weight_dtype == "auto")
            return invalid_field("weight_dtype",
                                 "weight_dtype auto lets the planner choose: give gpu_memory_budget too");
        const bool layerwise = f.residency == "layerwise" || (f.residency.empty() && f.resident_blocks >= 0);
        ch.dit.mode = ch.text.mode = layerwise ? model::Residency::kLayerwise : model::Residency::kResident;
        ch.dit.resident_layers = std::max(0, f.resident_blocks);
        ch.dit.format = f.weight_dtype == "int8" ? WeightFormat::kInt8 : WeightFormat::kNative;
        for (const auto& c : comps)
            if (c.hot && layerwise && ch.dit.resident_layers > c.layers)
                return invalid_field("resident_blocks",
                                     "resident_blocks " + std::to_string(ch.dit.resident_layers) +
                                         " exceeds the DiT's " + std::to_string(c.layers) + " blocks");
        return ch;
    }
    H3_ASSIGN_OR_RETURN(uint64_t budget, parse_byte_size(f.gpu_memory_budget, "gpu_memory_budget"));
    PlanOptions po;
    po.budget = budget;
    if (!f.residency.empty())
        po.residency =
            f.residency == "layerwise" ? model::Residency::kLayerwise : model::Residency::kResident;
    if (f.resident_blocks >= 0) {
        po.residency = model::Residency::kLayerwise;
        po.resident_layers = f.resident_blocks;
    }
    if (f.weight_dtype == "bf16") po.format = WeightFormat::kNative;
    if (f.weight_dtype == "int8") po.format = WeightFormat::kInt8;
    po.allow_int8 = f.weight_dtype == "auto" || f.weight_dtype == "int8";
    po.keep_between_jobs = keep_between_jobs;
    po.prefetch_depth = depth;
    auto planned = plan_memory(comps, po);
    if (!planned.ok())
        return planned.status()
            .with_context("gpu_memory_budget " + f.gpu_memory_budget)
            .with_field("gpu_memory_budget");
    MemoryPlan plan = std::move(planned).value();
    for (const ComponentPlan& cp : plan.components) {
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

Result<ComputePrecision> compute_precision(const std::string& dtype, const std::string& precision) {
    if (precision == "fp8") {
        if (dtype != "bf16")
            return invalid_field("precision", "precision fp8 needs dtype bf16 (fp8 is a bf16-model option)");
        return ComputePrecision::kFp8;
    }
    if (!precision.empty() && precision != "bf16")
        return invalid_field("precision", "precision '" + precision + "' must be bf16 or fp8");
    if (dtype == "fp32") return ComputePrecision::kFp32;
    if (dtype == "fp16") return ComputePrecision::kFp16;
    if (dtype == "bf16") return ComputePrecision::kDefault;
    return invalid_field("dtype", "dtype '" + dtype + "' must be bf16, fp16 or fp32");
}

Result<ResidencyChoice> resolve_checkpoint_residency(const WeightPolicy& f, const std::string& root,
                                                     ComputePrecision precision, const Workload& workload,
                                                     bool ref2va, bool serving) {
    std::vector<ComponentBytes> comps;
    if (!f.gpu_memory_budget.empty()) {
        H3_ASSIGN_OR_RETURN(comps, checkpoint_component_bytes(root, dit_precision(precision), workload,
                                                              ref2va ? "transformer_ref" : "transformer"));
    }
    if (precision == ComputePrecision::kFp8) {
        H3_ASSIGN_OR_RETURN(ResidencyChoice ch, resolve_residency(f, comps, serving));
        if (!ch.dit.plain())
            return invalid_field("precision",
                                 "precision fp8 keeps its e4m3 block weights resident: the DiT cannot be " +
                                     ch.dit.describe() + " (drop precision fp8, or the residency options)");
        return ch;
    }
    return resolve_residency(f, comps, serving);
}

void apply_residency(const ResidencyChoice& ch, PlacementPlan& plan, bool serving) {

    plan[Component::kTransformer].weights = ch.dit;
    plan[Component::kTransformerRef].weights = ch.dit;
    plan[Component::kTextEncoder].weights = ch.text;
    if (!ch.plan) return;
    plan.memory_plan = ch.plan->text;
    for (const ComponentPlan& cp : ch.plan->components)
        for (Component c : kAllComponents) {
            const bool match =
                cp.name == component_name(c) || (cp.name == "transformer" && c == Component::kTransformerRef);
            if (!match) continue;
            if (c != Component::kTransformer && c != Component::kTransformerRef &&
                c != Component::kTextEncoder) {
                plan[c].weights = cp.residency;
                plan[c].weights.pin_host = ch.dit.pin_host;
            }
            if (serving) plan[c].residency = cp.kept ? Residency::kResident : Residency::kPerJob;
        }
}

} // namespace h3::runtime
