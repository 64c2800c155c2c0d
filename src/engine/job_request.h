// h3::JobRequest (the public request) onto pipeline::JobInput: the files it names are read here (prompt
// embeddings, keyframe images, references); errors name the request field.
#pragma once

#include "pipeline/job_builder.h"

#include <h3/engine.h>

namespace h3 {

// Without reading files: the fields a checkpoint-free check can see.
pipeline::JobInput job_input_fields(const JobRequest& request);
// The whole input, files read.
Result<pipeline::JobInput> job_input(const JobRequest& request);

} // namespace h3
