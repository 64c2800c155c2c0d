// What a job will cost before it runs: the denoise's DiT FLOPs (forwards × layers × cache::block_flops over
// the job's rows: generated video, both audio channels, keyframe / reference rows and the conditioning rows
// when known) and, with a measured arithmetic rate, the seconds they take. The rate is measured, not assumed:
// measure_gemm_rate times the engine's own GEMM at the DiT's width on the job's device (a fraction of a
// second, once per process and width). The estimate counts the DiT's GEMMs and attention only (no step cache
// skipping, no decode): a lower bound that is close for long jobs, where the DiT dominates. A front end warns
// when a CPU job's estimate passes kSlowJobSeconds.
#pragma once

#include "core/dtype.h"
#include "core/status.h"
#include "model/dit/dit_config.h"
#include "ops/context.h"
#include "pipeline/job.h"
#include "runtime/model_store.h"

#include <cstdint>
#include <string>

namespace h3::pipeline {

// Past this (seconds), a front end says the job is slow and how to get a smaller one.
inline constexpr double kSlowJobSeconds = 600;

// The rows one forward runs over (text rows: the precomputed / random rows, else `prompt_rows`).
int64_t job_rows(const GenerationJob& job, int64_t prompt_rows = 0);
// The DiT FLOPs of the job's denoise (every forward, every block).
double job_dit_flops(const GenerationJob& job, const model::DitConfig& config);

// FLOP/s of ops::gemm on `ctx` at a DiT's width (x [R, D] · W [D, D]ᵀ in `dtype`, R rows for ~0.1 GFLOP a
// call, 64 to 4096), repeated for at least 50 ms; remembered per (device, width, dtype) for the process.
Result<double> measure_gemm_rate(const ops::Context& ctx, int64_t width, DType dtype);

// The rate a CPU store's jobs are estimated with (JobBuilderOptions::flops_per_second): measure_gemm_rate at
// its DiT's width and arithmetic; 0 on a GPU or without a DiT (no estimate).
Result<double> cpu_flops_rate(const runtime::ModelStore& store);
// The warning a front end prints before a slow CPU job (empty when the job has no estimate or it is under
// kSlowJobSeconds): the estimate, the FLOPs and the rate, and how to get a smaller job in the field names
// (size, seconds, num_inference_steps).
std::string slow_job_warning(const GenerationJob& job, double flops_per_second);

// "2 h 13 min", "14 min", "38 s"
std::string format_duration(double seconds);

} // namespace h3::pipeline
