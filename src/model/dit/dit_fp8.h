// The DiT's opt-in fp8 precision (DitPrecision::kFp8): e4m3 copies of the transformer blocks' GEMM weights
// (per output channel power-of-two scales) and the per-block switch for e4m3 attention.
#pragma once

#include "model/dit/dit_config.h"
#include "model/dit/dit_weights.h"
#include "ops/context.h"

namespace h3::model {

// Fills every transformer block's `fp8` (refiner blocks stay bf16) on ctx's device, skipping the layers
// `options.bf16_layers` names; unless options.keep_bf16, the bf16 copy of each quantized weight is released.
// e4m3 attention needs head dim 128 (the official config); other configs keep bf16 attention.
// Bad exception entries are reported by name.
Status quantize_dit_fp8(const ops::Context& ctx, const DitConfig& config, const DitFp8Options& options,
                        DitWeights& weights);

} // namespace h3::model
