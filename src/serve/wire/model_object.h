// The model list (GET /v1/models, OpenAI-style) of a server: the one checkpoint it loaded, with what a
// request that says nothing gets (the job builder's defaults: the checkpoint's h3_defaults.json, else the
// release's), the limits of the fields and, where the checkpoint declares one, its captions' vocabulary. The
// web page names the model and fills its fields from it. No HTTP here.
#pragma once

#include "pipeline/job_builder.h"

#include <nlohmann/json.hpp>

namespace h3::api {

// {"object": "list", "data": [{"id", "object": "model", "owned_by", "root", "device", "dtype",
//   "defaults": {"size", "frames", "seconds", "num_inference_steps"}, "defaults_from", "limits",
//   "vocabulary"}]}
nlohmann::json model_list(const pipeline::JobBuilder& builder);

} // namespace h3::api
