// `make-tiny`: a small random H3 checkpoint in the official layout, deterministic from a seed. It is the
// project's embedded default model (tests, the README's first command, CI).
#pragma once

#include "core/status.h"
#include "model/dit/dit_config.h"

#include <cstdint>
#include <string>

namespace h3::model {

enum class TinyLayout { kDiffusers, kOriginal };

struct TinyCheckpointParams {
    std::string dir;
    uint64_t seed = 0;
    TinyLayout layout = TinyLayout::kDiffusers;
    int shards = 2; // the transformer is split like the official one, with an index.json
};

// hidden 64, 2 heads × 32, 2 blocks, 1 refiner block, rope_freq_dim 4 (6·4 ≤ 32), ffn 128, text_dim 64.
DitConfig tiny_dit_config();

// Writes model_index.json, scheduler/ and audio_scheduler/ (diffusers) or FL2VA/ + Ref2VA/ (original),
// and the transformer + transformer_ref weights. The ref DiT uses seed + 1.
Status write_tiny_checkpoint(const TinyCheckpointParams& params);

} // namespace h3::model
