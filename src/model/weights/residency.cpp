#include "model/weights/residency.h"

#include <cstdio>

namespace h3::model {

const char* residency_name(Residency r) {
    return r == Residency::kResident ? "resident" : "layerwise";
}

const char* weight_format_name(WeightFormat f) {
    return f == WeightFormat::kNative ? "native" : "int8";
}

Result<Residency> parse_residency(const std::string& text, const std::string& field) {
    if (text == "resident") return Residency::kResident;
    if (text == "layerwise") return Residency::kLayerwise;
    return invalid_argument(field + " '" + text + "' must be resident or layerwise");
}

std::string ResidencyOptions::describe() const {
    std::string s = residency_name(mode);
    if (mode == Residency::kLayerwise)
        s += " (first " + std::to_string(resident_layers) + " resident, prefetch " +
             std::to_string(prefetch_depth) + ", " + (pin_host ? "pinned" : "pageable") + " host masters)";
    if (format == WeightFormat::kInt8) s += ", int8 weights";
    return s;
}

std::string ResidencyStats::summary() const {
    auto gib = [](uint64_t b) { return static_cast<double>(b) / (1ull << 30); };
    char buf[320];
    std::snprintf(
        buf, sizeof(buf),
        "device %.2f GiB (resident %.2f, ring %.2f, staging %.2f), host masters %.2f GiB (%.2f mapped, "
        "%.2f pinned); %lld uploads, %.2f GiB H2D, %lld sync loads, %lld dropped prefetches",
        gib(device_bytes()), gib(device_resident_bytes), gib(device_ring_bytes), gib(device_staging_bytes),
        gib(host_master_bytes), gib(host_mapped_bytes), gib(host_pinned_bytes),
        static_cast<long long>(uploads), gib(h2d_bytes), static_cast<long long>(sync_loads),
        static_cast<long long>(dropped_prefetches));
    return buf;
}

} // namespace h3::model
