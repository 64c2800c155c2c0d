#include "pipeline/provenance_json.h"

namespace h3::pipeline {

nlohmann::json kernels_json(const ops::ProvenanceRecord::Calls& calls) {
    return calls; // nested std::maps: JSON objects
}

nlohmann::json fallbacks_json(const std::vector<ops::Fallback>& fallbacks) {
    nlohmann::json fb = nlohmann::json::array();
    for (const ops::Fallback& f : fallbacks)
        fb.push_back({{"stage", f.stage},
                      {"family", f.family},
                      {"wanted", f.wanted},
                      {"used", f.used},
                      {"why", f.why}});
    return fb;
}

void add_provenance(nlohmann::json& j, const ops::ProvenanceRecord& record) {
    j["kernels"] = kernels_json(record.calls());
    j["fallbacks"] = fallbacks_json(record.fallbacks());
}

} // namespace h3::pipeline
