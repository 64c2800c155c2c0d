// Full-width random DiT weights generated on the model's device, and a synthetic packed layout of the
// official shape, for `h3-engine bench dit`. Values are uniform (ops::fill_uniform), scaled like
// random_weights.h so activations stay O(1).
#pragma once

#include "model/dit/dit_inputs.h"
#include "model/dit/dit_model.h"
#include "ops/context.h"

#include <h3/defaults.h>

namespace h3::model {

struct RandomDitParams {
    int blocks = 0;             // blocks to create (0 = config.num_layers)
    bool adaln = false;         // also create the AdaLN projections
    bool gate_compress = false; // FastH3: every block's VSA compression gate
    uint64_t seed = 0;
    // Blocks' six projection matrices (and AdaLN projections) made on the device one block at a time and
    // moved to host memory (page-locked when `pinned`): the masters of a layerwise / int8 bench, without the
    // whole model ever sitting on the device.
    bool host_blocks = false;
    bool pinned = true;
};
Result<DitWeights> random_dit_weights(const DitConfig& config, const ops::Context& ctx,
                                      DitPrecision precision, const RandomDitParams& params);

// Random AdaLN tables (no AdaLN weights needed) for the given timesteps.
Result<AdalnTables> random_adaln_tables(const DitConfig& config, const ops::Context& ctx, DType act,
                                        const std::vector<float>& timesteps, int blocks, uint64_t seed);

// Geometry of a t2va request: text rows, latent frames T, latent grid h×w, audio latents A per channel.
struct SyntheticLayout {
    int64_t text = kReleasePromptRows, latent_frames = 37, latent_h = 48, latent_w = 84, audio = 207;
    int64_t video_rows(const DitConfig& c) const {
        return latent_frames * (latent_h / c.patch_h) * (latent_w / c.patch_w);
    }
    int64_t rows(const DitConfig& c) const { return text + 2 * audio + video_rows(c); }
};
// [text | audio L | audio R | video] with tags, two timesteps (video/text at t_v, audio at t_a) and
// positions shaped like spec §5.3; random values for the row contents.
DitPackedInputs synthetic_inputs(const DitConfig& config, const SyntheticLayout& layout, float t_video,
                                 float t_audio, uint64_t seed);

} // namespace h3::model
