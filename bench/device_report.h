// What the benches print about the device context's switches, so that before/after runs are labelled.
#pragma once

#include "ops/ops.h"

#include <string>

namespace h3::bench {

// Whether cuBLASLt's algorithms are timed per shape (H3_GEMM_AUTOTUNE).
bool gemm_autotune(const ops::Context& ctx);
// The conv3d choice (H3_CONV3D): auto | igemm16 | wgmma | tf32 | cudnn ("cpu" on the CPU). Under
// --exact-fp32 (tf32 false in the report) all but cudnn run the fp32 FMA kernel; igemm16 below sm_80 runs
// the built-in kernels.
std::string conv3d_backend(const ops::Context& ctx);

} // namespace h3::bench
