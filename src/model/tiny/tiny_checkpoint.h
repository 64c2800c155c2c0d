// `make-tiny`: a small random H3 checkpoint in the official layout, deterministic from a seed. It is the
// project's embedded default model (tests, the README's first command, CI).
#pragma once

#include "core/status.h"
#include "model/dit/dit_config.h"

#include <cstdint>
#include <string>

namespace h3::model {

enum class TinyLayout { kDiffusers, kOriginal };
// kFastH3: the transformer also carries FastH3's per-block attn.to_gate_compress and the root the sidecar
// fastvideo_inference.json (4-forward ladder, VSA at sparsity 0.9, 64-row tiles), like a FastVideo export.
enum class TinyVariant { kBase, kFastH3 };

struct TinyCheckpointParams {
    std::string dir;
    uint64_t seed = 0;
    TinyLayout layout = TinyLayout::kDiffusers;
    int shards = 2; // the transformer is split like the official one, with an index.json
    TinyVariant variant = TinyVariant::kBase;
};

// hidden 64, 2 heads × 32, 2 blocks, 1 refiner block, rope_freq_dim 4 (6·4 ≤ 32), ffn 128, text_dim 64.
DitConfig tiny_dit_config();

// Writes model_index.json, scheduler/ and audio_scheduler/ (diffusers) or FL2VA/ + Ref2VA/ (original),
// and the transformer + transformer_ref weights. The ref DiT uses seed + 1.
Status write_tiny_checkpoint(const TinyCheckpointParams& params);

} // namespace h3::model
