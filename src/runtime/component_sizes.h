// Component byte sizes for the memory planner, from the configs (the DiT's and the conditioner's tensor
// inventories, exact) and the weight files' headers (the VAEs), and the working memory of each stage from
// the request shape (the DiT forward's scratch formula, the text forward's buffers, the VAE decoder's
// tile-clip tokens).
#pragma once

#include "model/dit/dit_config.h"
#include "model/dit/dit_weights.h"
#include "model/text/text_config.h"
#include "model/video_vae/video_vae.h"
#include "runtime/memory_plan.h"

#include <h3/defaults.h>

#include <string>
#include <vector>

namespace h3::runtime {

// The request shape the working memory is sized for (defaults: the release shape, h3/defaults.h: 1344×768×124
// frames with a 537-token prompt, and a 50-point schedule).
struct Workload {
    int width = kReleaseWidth, height = kReleaseHeight; // the canvas (the VAE decoder's tiles)
    int64_t dit_rows = 38247;                           // packed rows of one forward
    int64_t text_rows = kReleasePromptRows;             // conditioner tokens
    int schedule_points = 50; // sigma grid points (timesteps in the AdaLN tables: up to 2·(points − 1))
    size_t ffn_chunk_bytes = 512ull << 20;
    int cache_buffers = 0; // fp32 [rows, hidden] buffers a step cache keeps (DBCache 4, TeaCache 3)
};

ComponentBytes dit_component_bytes(const model::DitConfig& c, model::DitPrecision p, const Workload& w);
ComponentBytes text_component_bytes(const model::TextConfig& c, model::DitPrecision p, int layers,
                                    const Workload& w);

// The video decoder's working memory for a width×height canvas of `latent_frames` latent frames (an estimate
// from the decode plan: one call decodes up to 16 tile-clips of one clip; its tokens hold the residual, norm,
// q, k, v, o and the FFN intermediate in fp32, plus the call's pixels).
uint64_t video_decoder_working_bytes(const model::VideoVaeConfig& vc, int width, int height,
                                     int64_t latent_frames);

// Every component of a checkpoint root a t2va job loads (transformer — or `dit_component` —, text encoder
// and vision tower when present, video and audio decoders), for precision `p`. A component with a config and
// no weight files (a configs-only root) is sized from its config's tensor inventory.
Result<std::vector<ComponentBytes>>
checkpoint_component_bytes(const std::string& root, model::DitPrecision p, const Workload& w,
                           const std::string& dit_component = "transformer");

} // namespace h3::runtime
