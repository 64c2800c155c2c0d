// cuBLASLt algorithm choice by measurement, shared by the bf16/fp32 GEMM (gemm.cu) and the e4m3 GEMM
// (gemm_fp8.cu): the heuristic's first few candidates are timed on the call's own operands and the fastest
// is kept, once per problem (the callers cache the choice). Private to ops/cuda.
#pragma once

#include "core/status.h"
#include "ops/context.h"
#include "ops/gemm_tuning_table.h"

#include <cublasLt.h>

#include <functional>
#include <optional>

namespace h3::ops::cuda_detail {

constexpr int kLtCandidates = 8; // heuristic results asked for and timed

struct LtChoice {
    int chosen = 0;       // index among the candidates (0: the heuristic's first)
    float best_ms = 0.0f; // its time per call; 0 when nothing was timed
};

// run(i) launches candidate i once on ctx's stream; a status other than success means the candidate refuses
// these operands (it is skipped). After a warm-up of candidate 0, every candidate runs a few times in each of
// two rounds (the second in reverse order) and keeps its best; candidate 0 is replaced only by one faster by
// a margin. Nothing is timed (chosen 0) while the stream is capturing a CUDA graph or without events; a
// fault in a trial run is returned as an error.
Result<LtChoice> fastest_lt_candidate(const Context& ctx, int candidates,
                                      const std::function<cublasStatus_t(int)>& run);

// Whether fastest_lt_candidate can time anything on ctx's stream (not while it captures a CUDA graph): a
// caller that prepares for the trial runs (scratch for them) asks first.
bool lt_timing_possible(const Context& ctx);

// The choice the context's tuning table (ops/gemm_tuning_table.h: this process's, an earlier one's through
// its file) holds for this problem of `family` — or for one of nearly as many rows (find_near) — when the
// heuristic offers the same `candidates` again; nullopt otherwise (then: time them).
std::optional<int> kept_lt_choice(const Context& ctx, const char* family, const GemmTuningTable::Key& key,
                                  int candidates);
// Records a timed choice in the context's tuning table (nothing without one, or when nothing was timed).
void keep_lt_choice(const Context& ctx, const char* family, const GemmTuningTable::Key& key, int candidates,
                    const LtChoice& choice);

} // namespace h3::ops::cuda_detail
