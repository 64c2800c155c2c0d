// `bench dit --attention vsa`: VSA's attention alone on the bench's shape — the tile-selection overhead (pool
// q/k, tile scores, top-k), each of VSA's small kernels alone (the compression branch's too), and the
// block-sparse kernel at a list of kept fractions of the video key tiles, each against the same kernel with
// every tile kept and against dense attention; its TFLOP/s on the visited tile pairs, and (CUDA) the mma.sync
// kernel's and the fp8 mode's on the same call.
#pragma once

#include "bench/cli_support.h"
#include "model/dit/dit_config.h"
#include "ops/vsa.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace h3::bench {

struct VsaScanParams {
    std::vector<double> kept_fractions; // of the video key tiles, in (0, 1]
    bool compete = false;
    int iters = 2;
    double dense_seconds = 0; // dense attention on the same shape (the ratio's denominator)
    bool variants = false;    // CUDA: also the wgmma kernel with deeper K/V rings
};

// q, k, v are filled with random values here; the selection comes from their real tile scores.
Result<nlohmann::json> vsa_attention_scan(const DeviceSession& session, const model::DitConfig& config,
                                          DType dtype, const ops::VsaTiles& tiles,
                                          const VsaScanParams& params);

} // namespace h3::bench
