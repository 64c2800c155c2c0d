// The job builder's FastH3 part: the `attention` field (dense or video sparse attention, spec §12) and the
// defaults a FastH3 checkpoint's fastvideo_inference.json (runtime::CheckpointInfo::fasth3) sets for the
// tasks of its student, the FL2VA DiT (t2va, fl2va): VSA at the trained sparsity, and — unless
// num_inference_steps is given — the trained rung schedule (4 forwards). ref2va runs on transformer_ref,
// which is no student: it keeps the base defaults, and an explicit `attention` vsa is refused. Errors start
// with the field name (`attention`) and report it.
#pragma once

#include "pipeline/job.h"
#include "pipeline/job_builder.h"
#include "runtime/model_store.h"

#include <string>

namespace h3::pipeline {

// No checkpoint needed: the field's syntax and the ref2va refusal.
Status check_attention_field(const JobInput& input, std::string* field);
// Against the checkpoint: job.attention, and job.steps / job.rungs from the sidecar when they are defaults
// (job.task and job.steps already set by the builder).
Status resolve_job_attention(const JobInput& input, const runtime::CheckpointInfo& info, GenerationJob& job,
                             std::string* field);

} // namespace h3::pipeline
