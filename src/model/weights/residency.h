// How the weights of a stack of identical layers (the DiT's 50 blocks, the conditioner's 50 text layers) are
// kept: all on the device (resident), or as host masters streamed through a ring of device slots
// (layerwise, the first K layers resident), in the precision's dtype or as W8A16 int8.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <string>

namespace h3::model {

enum class Residency { kResident, kLayerwise };
enum class WeightFormat { kNative, kInt8 }; // native: the precision's dtype (bf16 / f16 / f32)

const char* residency_name(Residency r);        // "resident" | "layerwise"
const char* weight_format_name(WeightFormat f); // "native" | "int8"
// "resident" | "layerwise"; errors name `field`.
Result<Residency> parse_residency(const std::string& text, const std::string& field = "residency");

struct ResidencyOptions {
    Residency mode = Residency::kResident;
    int resident_layers = 0; // layerwise: layers [0, K) stay on the device
    int prefetch_depth = 1;  // layerwise: layers uploaded ahead of the one computing (>= 1)
    bool pin_host = true;    // page-lock the host masters (CUDA devices only; pageable on the CPU)
    WeightFormat format = WeightFormat::kNative;
    std::string int8_cache_dir; // int8: quantized masters cached here (empty: quantize at every load)

    bool plain() const { return mode == Residency::kResident && format == WeightFormat::kNative; }
    // "resident", "layerwise (K=8, prefetch 1, pinned)", "... , int8"
    std::string describe() const;
};

// Counters of one weight source since the last reset, and what it holds.
struct ResidencyStats {
    uint64_t h2d_bytes = 0;         // bytes uploaded into the ring
    int64_t uploads = 0;            // layer uploads
    int64_t sync_loads = 0;         // layers that were not prefetched (the first after a jump)
    int64_t dropped_prefetches = 0; // prefetched layers released unused (a step cache jumped past them)
    int64_t dequantized = 0;        // int8 layers dequantized into the staging slot
    uint64_t device_resident_bytes = 0, device_ring_bytes = 0, device_staging_bytes = 0;
    uint64_t host_master_bytes = 0, host_mapped_bytes = 0, host_pinned_bytes = 0;
    uint64_t device_bytes() const { return device_resident_bytes + device_ring_bytes + device_staging_bytes; }
    std::string summary() const;
};

} // namespace h3::model
