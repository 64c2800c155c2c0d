// `make-tiny`: a small random H3 checkpoint in the official layout, deterministic from a seed: the tests' and
// CI's model (the embedded default of `generate` is the trained demo model, models/h3-demo).
#pragma once

#include "core/status.h"
#include "model/dit/dit_config.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace h3::model {

enum class TinyLayout { kDiffusers, kOriginal };
// kFastH3: the transformer also carries FastH3's per-block attn.to_gate_compress and the root the sidecar
// fastvideo_inference.json (4-forward ladder, VSA at sparsity 0.9, 64-row tiles), like a FastVideo export.
enum class TinyVariant { kBase, kFastH3 };

// The latent spaces and the conditioning width of a tiny checkpoint. The defaults are the released VAEs'
// (24 video latent channels, ×16, 32 audio latent channels) and the tiny text width; other values make a
// checkpoint as diffusers writes one for other sizes (the configs say it; the engine derives its geometry
// from them).
struct TinyGeometry {
    int latent_channels = 24;       // vae latent_channels = transformer in_channels
    int vae_stride = 16;            // 16 (spatial_downsample_factors 2,2,2,2,1,1) or 8 (2,2,2,1,1,1)
    int audio_latent_channels = 32; // audio_vae latent_channels = transformer audio_in_channels
    int text_dim = 64;              // text encoder hidden size = transformer text_dim = vision tower output
    int dit_heads = 2; // the DiTs' attention heads (× 32 dims); 8 lets tests split them 2/4/8 ways
    // The audio VAE's hop: 800 (decoder rates 8·10·10, encoder rates the official 2·4·4·5·5) or 4 (encoder
    // and decoder rates [2, 2], as a small diffusers test config has: 8000 latents/s by its own rate, while
    // the official pipeline still counts 40).
    int audio_hop = 800;
    Status validate() const;
    bool is_default() const;
};

struct TinyCheckpointParams {
    std::string dir;
    uint64_t seed = 0;
    TinyLayout layout = TinyLayout::kDiffusers;
    int shards = 2; // the transformer is split like the official one, with an index.json
    TinyGeometry geometry = {};
    TinyVariant variant = TinyVariant::kBase;
};

// hidden 64, 2 heads (geometry.dit_heads) × 32, 2 blocks, 1 refiner block, rope_freq_dim 4 (6·4 ≤ 32), ffn
// 128, text_dim 64; the latent and text widths of `geometry`.
DitConfig tiny_dit_config(const TinyGeometry& geometry = {});

// Writes model_index.json, scheduler/ and audio_scheduler/ (diffusers) or FL2VA/ + Ref2VA/ (original),
// and the transformer + transformer_ref weights. The ref DiT uses seed + 1.
Status write_tiny_checkpoint(const TinyCheckpointParams& params);

// The FastH3 sidecar (fastvideo_inference.json) as FastVideo's export writes it: the release's ladder (4
// forwards) and VSA policy (sparsity 0.9). make-tiny --variant fasth3 and bench request --fasth3 write it.
nlohmann::json fasth3_contract_json();

} // namespace h3::model
