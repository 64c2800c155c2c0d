// A random adapter in canonical form (benches, make-tiny --lora): rank-r factors on the q/k/v/out/FFN
// projections of the first `blocks` DiT blocks (optionally the refiner blocks and every AdaLN projection
// too), filled on the host by ops::fill_uniform and sized so the delta stays small next to W.
#pragma once

#include "model/dit/dit_config.h"
#include "model/lora/lora_adapter.h"

#include <cstdint>

namespace h3::model {

struct RandomLoraParams {
    int64_t rank = 128;
    int blocks = 0; // 0: every block
    DType dtype = DType::kBF16;
    uint64_t seed = 0;
    bool refiner = false; // also the refiner blocks' projections
    bool adaln = false;   // also the AdaLN projections (blocks and final layer)
    float scale = 1.0f;   // the factors' alpha / rank
};
Result<LoraAdapter> random_lora_adapter(const DitConfig& config, const RandomLoraParams& params);

} // namespace h3::model
