// `bench dit`'s report: the JSON object (--json) and the text lines, from what each measurement gave.
#pragma once

#include "bench/dit/attention.h"
#include "bench/dit/blocks.h"
#include "bench/dit/forward.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace h3::bench {

struct DitBenchResults {
    BlockTimings blocks;
    size_t block_peak = 0; // peak device bytes over the block passes
    ForwardDataAttention forward_data_attention;
    std::vector<ForwardRun> forwards;
    double attention_seconds = 0; // attention alone on random q, k, v
    nlohmann::json vsa;           // --attention vsa: the kept-fraction scan (dit/vsa_scan.h)
    size_t h2d_block_bytes = 0;   // one block's streamed bytes
    double h2d_pinned_seconds = 0, h2d_pageable_seconds = 0;
};

// VSA's selection and compression in a block's per-op times (name → seconds): every phase named vsa_*
// except the attention itself (vsa_sparse_attention, vsa_dense_attention) and the compression gate's GEMM
// (vsa_gate_gemm, one of the model's projections) — the pooling, scores, top-k, compression and gate add.
double vsa_overhead_seconds(const nlohmann::json& per_op_seconds);
nlohmann::json dit_report_json(const DitBench& b, const DitBenchOptions& o, const DitBenchResults& r);
// The text report of `j` (dit_report_json's, with "lora" when timed).
void print_dit_report(const DitBench& b, const DitBenchResults& r, const nlohmann::json& j);

} // namespace h3::bench
