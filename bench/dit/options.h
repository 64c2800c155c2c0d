// `h3-bench dit`'s options (dit/command.cpp defines their flags).
#pragma once

#include "bench/cli_support.h"
#include "bench/synthetic_layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h3::bench {

struct DitBenchOptions {
    std::string config = "official", size = release_size(), device = "cuda", dtype = "bf16", precision;
    int frames = kReleaseFrames, text = kReleasePromptRows, blocks = 4, iters = 2;
    bool random_weights = false, json = false;
    bool block_graphs = false;         // also time the forward with recorded blocks (CUDA graphs)
    bool attention_candidates = false; // every attention candidate on the forward's own q, k, v
    int64_t lora_rank = 0;          // > 0: also time random rank-R adapters on q/k/v/out/FFN of every block
    std::string lora_mode = "both"; // runtime | merged | both
    std::string attention = "dense";
    std::string fp8_accum;        // --precision fp8: "exact" | "fast" (empty: DitFp8Options' default)
    std::string fp8_fused = "on"; // --precision fp8: on | off (DitFp8Options::fused_quantization)
    std::vector<double> vsa_scan = {0.1, 0.25, 0.5, 1.0}; // kept fractions timed with --attention vsa
    bool vsa_variants = false; // also the sparse kernels kAuto does not pick (deeper K/V rings)
    ResidencyFlags residency;
    int sp = 0, tp = 0, ring = 0; // 0: not given; 1: the group path at world size 1 (nothing else is allowed)
    int overlap_groups = 0;       // --sp 1: the Ulysses head groups (DitParallel::overlap_groups)
};

} // namespace h3::bench
