#include "runtime/placement.h"

namespace h3::runtime {

const char* component_name(Component c) {
    switch (c) {
    case Component::kTransformer:
        return "transformer";
    case Component::kTransformerRef:
        return "transformer_ref";
    case Component::kTextEncoder:
        return "text_encoder";
    case Component::kVisionTower:
        return "vision_tower";
    case Component::kVideoEncoder:
        return "vae_encoder";
    case Component::kVideoDecoder:
        return "vae_decoder";
    case Component::kAudioEncoder:
        return "audio_vae_encoder";
    case Component::kAudioDecoder:
        return "audio_vae_decoder";
    }
    return "unknown";
}

const char* precision_name(ComputePrecision p) {
    switch (p) {
    case ComputePrecision::kFp32:
        return "fp32";
    case ComputePrecision::kFp8:
        return "fp8";
    case ComputePrecision::kFp16:
        return "fp16";
    case ComputePrecision::kBf16:
        return "bf16";
    case ComputePrecision::kDefault:
        break;
    }
    return "default";
}

const char* residency_name(Residency r) {
    return r == Residency::kResident ? "resident" : "per_job";
}

PlacementPlan PlacementPlan::per_job(Device device, ComputePrecision precision) {
    PlacementPlan p;
    for (Component c : kAllComponents) p[c] = {.residency = Residency::kPerJob, .device = device};
    for (Component c : {Component::kTransformer, Component::kTransformerRef, Component::kTextEncoder,
                        Component::kVisionTower})
        p[c].precision = precision;
    if (precision == ComputePrecision::kFp8) // e4m3 is a DiT mode; the conditioner keeps bf16
        for (Component c : {Component::kTextEncoder, Component::kVisionTower})
            p[c].precision = ComputePrecision::kDefault;
    return p;
}

PlacementPlan PlacementPlan::serving(Device device, ComputePrecision precision, Residency text_encoder) {
    PlacementPlan p = per_job(device, precision);
    for (Component c : {Component::kTransformer, Component::kTransformerRef, Component::kVideoDecoder,
                        Component::kAudioDecoder})
        p[c].residency = Residency::kResident;
    p[Component::kTextEncoder].residency = text_encoder;
    p[Component::kVisionTower].residency = text_encoder;
    return p;
}

Status PlacementPlan::validate() const {
    const Device d = components[0].device;
    for (Component c : kAllComponents)
        if (!((*this)[c].device == d))
            return unimplemented(std::string("placement: ") + component_name(c) + " is on " +
                                 (*this)[c].device.to_string() + " but " + component_name(kAllComponents[0]) +
                                 " on " + d.to_string() + "; one device for every component for now");
    return parallel.validate(d);
}

Status ParallelPlan::validate(const Device& device) const {
    if (sp < 1 || tp < 1 || ring < 1)
        return invalid_field("sp", "sp " + std::to_string(sp) + ", tp " + std::to_string(tp) + ", ring " +
                                       std::to_string(ring) + ": the degrees must be at least 1");
    if (!gpus.empty() && static_cast<int>(gpus.size()) != world())
        return invalid_field("gpus", "gpus names " + std::to_string(gpus.size()) +
                                         " device(s) for sp·ring·tp = " + std::to_string(world()) +
                                         " ranks; give one GPU per rank");
    if (process.active()) {
        if (process.world != world())
            return invalid_field("sp", "WORLD_SIZE " + std::to_string(process.world) + " but sp " +
                                           std::to_string(sp) + ", ring " + std::to_string(ring) + ", tp " +
                                           std::to_string(tp) + " needs " + std::to_string(world()) +
                                           " ranks (one process per rank)");
        if (!gpus.empty())
            return invalid_field(
                "gpus", "gpus with RANK/WORLD_SIZE: a launched process runs one rank on cuda:LOCAL_RANK");
        return ok_status();
    }
    if (!gpus.empty() && device.is_cpu())
        return invalid_field("gpus",
                             "gpus names CUDA devices but the device is cpu (the CPU ranks need no gpus)");
    if (active() && device.is_cuda() && gpus.empty())
        return invalid_field("gpus",
                             "sp/ring/tp on CUDA: give the ranks' GPUs in gpus (one per rank, e.g. 0,1 for " +
                                 std::to_string(world()) + " ranks)");
    return ok_status();
}

std::string ParallelPlan::describe() const {
    if (!active()) return "";
    std::string s = "sp " + std::to_string(sp) + (ring > 1 ? " x ring " + std::to_string(ring) : "") +
                    " x tp " + std::to_string(tp) + " (" + std::to_string(world()) + " ranks on ";
    if (process.active()) return s + "one per process, this is rank " + std::to_string(process.rank) + ")";
    if (gpus.empty()) return s + "cpu)";
    for (size_t i = 0; i < gpus.size(); ++i) s += (i ? "," : "cuda:") + std::to_string(gpus[i]);
    return s + ")";
}

std::string PlacementPlan::describe() const {
    std::string s;
    for (Component c : kAllComponents) {
        const ComponentPlacement& p = (*this)[c];
        if (!s.empty()) s += ", ";
        s += std::string(component_name(c)) + " " + residency_name(p.residency) + " " + p.device.to_string() +
             (p.precision == ComputePrecision::kDefault ? ""
                                                        : std::string(" ") + precision_name(p.precision)) +
             (p.weights.plain() ? "" : " weights " + p.weights.describe());
    }
    if (parallel.active()) s += "; dit group " + parallel.describe();
    return s;
}

} // namespace h3::runtime
