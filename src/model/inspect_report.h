// What `h3-engine inspect` reports about a checkpoint: components, tensor counts, dtypes, bytes, and the
// tensors missing / unexpected / mis-shaped against the official naming scheme for the component's config.
#pragma once

#include "core/status.h"
#include "io/checkpoint.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace h3::model {

struct TensorSetSummary {
    std::string source;
    size_t files = 0;
    size_t tensors = 0;
    uint64_t bytes = 0;
    std::map<std::string, size_t> dtype_counts; // "bf16" -> n
};

struct ConformanceReport {
    bool checked = false; // false when no naming scheme is known for this component
    std::string scheme;   // "diffusers DiT (50 blocks)" ...
    std::vector<std::string> missing;
    std::vector<std::string> unexpected;
    std::vector<std::string> shape_mismatches; // "name: expected [a, b], found [c, d]"
    std::vector<std::string> dtype_mismatches;
    bool ok() const { return missing.empty() && unexpected.empty() && shape_mismatches.empty(); }
};

struct ComponentReport {
    io::Component component;
    std::optional<TensorSetSummary> weights;
    ConformanceReport conformance;
    std::string error; // a component that could not be read is reported, not fatal
};

struct InspectReport {
    std::string path;
    std::string layout; // "diffusers", "original", "component", "safetensors"
    std::optional<double> video_shift, audio_shift;
    std::vector<ComponentReport> components;
    std::optional<TensorSetSummary> tensors; // when PATH is a file or a sharded set
    bool ok() const;
};

TensorSetSummary summarize(const io::TensorSet& set);
Result<InspectReport> inspect_path(const std::string& path);
nlohmann::json to_json(const InspectReport& r);
std::string to_text(const InspectReport& r);

} // namespace h3::model
