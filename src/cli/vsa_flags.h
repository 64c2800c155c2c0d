// generate's FastH3 flag: --attention dense|vsa[:...] as the job builder's `attention` field, and the words
// generate prints about the job's attention and schedule.
#pragma once

#include "pipeline/job.h"
#include "pipeline/job_builder.h"

#include <CLI/CLI.hpp>

#include <string>

namespace h3::cli {

// --attention (absent: the checkpoint's fastvideo_inference.json decides, else dense).
void add_attention_option(CLI::App* sub, std::string& attention);
// The flag's value into the builder's input (given only when the flag was).
void attention_input(const std::string& attention, pipeline::JobInput& in);
// ", FastH3 rungs" when the job runs the sidecar's rung schedule, else "".
const char* rungs_note(const pipeline::GenerationJob& job);

} // namespace h3::cli
