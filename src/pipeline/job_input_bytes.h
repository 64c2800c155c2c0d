// A job's input as bytes and back (issue #46): what a server's front sends the process that runs the job (a
// replica's rank 0, pipeline over a job channel) and what rank 0 broadcasts to the other ranks of its group,
// so that every process builds the same GenerationJob with its own JobBuilder (the same checkpoint and
// options give the same job; the seed travels resolved). Every field of JobInput travels: the scalars and
// the cache / LoRA fields as a JSON header, the decoded keyframes, references and prompt rows as binary runs
// after it. unpack's errors name what is malformed.
#pragma once

#include "core/status.h"
#include "pipeline/job_builder.h"

#include <cstdint>
#include <vector>

namespace h3::pipeline {

std::vector<uint8_t> pack_job_input(const JobInput& input);
Result<JobInput> unpack_job_input(const std::vector<uint8_t>& bytes);

} // namespace h3::pipeline
