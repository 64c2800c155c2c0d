// Kernel provenance (ops/provenance.h) as JSON, one schema for the job metrics and the benches:
// "kernels": stage → op family → implementation → host calls; "fallbacks": [{stage, family, wanted, used,
// why}].
#pragma once

#include "ops/provenance.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace h3::pipeline {

nlohmann::json kernels_json(const ops::ProvenanceRecord::Calls& calls);
nlohmann::json fallbacks_json(const std::vector<ops::Fallback>& fallbacks);
// Both into `j` from a record (a bench's: its one stage is "job").
void add_provenance(nlohmann::json& j, const ops::ProvenanceRecord& record);

} // namespace h3::pipeline
