// The DiT forward's inputs and outputs (the reference's argument names), validated before any compute.
#pragma once

#include "core/tensor.h"
#include "io/safetensors.h"
#include "model/dit/dit_config.h"

#include <vector>

namespace h3::model {

// Host tensors. Integers may be i32 or i64, positions f32 or f64, values any float dtype; a leading batch
// dim of 1 is accepted and dropped by `from_named`.
struct DitInputs {
    Tensor hidden_states;         // [Nv, video_patch_dim]
    Tensor audio_hidden_states;   // [Na, audio_in_channels]
    Tensor encoder_hidden_states; // [L, text_dim]
    Tensor timestep;              // [M] unique timesteps t in [0, 1]
    Tensor timestep_indices;      // [S] index into timestep per packed row
    Tensor token_tags;            // [S] 0 video, 1 text, 2 audio
    Tensor position_ids;          // [S, 3] (t, h, w)
    Tensor video_indices;         // [Nv]
    Tensor audio_indices;         // [Na]
    Tensor text_indices;          // [L]

    int64_t rows() const { return timestep_indices.defined() ? timestep_indices.dim(0) : 0; }
    // Reads the named tensors from a safetensors file (missing names are reported by name).
    static Result<DitInputs> from_file(const std::string& path);
    // Checks every shape, dtype and index range against the config; errors name the input and what was
    // expected. Each packed row must be covered exactly once by text, video or audio indices.
    Status validate(const DitConfig& config) const;
};

// The packed sequence's segments as video sparse attention tiles them (spec §12): the prefix segment sizes in
// packed order (text, keyframe rows, audio rows) and the generated video's token grid (latent frames,
// h/patch, w/patch), whose rows end the sequence. The pipeline fills it for t2va / fl2va; it stays empty
// where the layout has no such form (ref2va, the `dit` command's free-form inputs).
struct PackedSegments {
    std::vector<int64_t> prefix;
    int64_t video_t = 0, video_h = 0, video_w = 0;
    bool defined() const { return video_t > 0 && video_h > 0 && video_w > 0; }
};

// Inputs converted to the forms the forward uses: i32 indices, f32 values, f64 positions.
struct DitPackedInputs {
    std::vector<int32_t> timestep_indices, token_tags, video_indices, audio_indices, text_indices;
    std::vector<double> positions; // [S*3]
    std::vector<float> timesteps;  // [M]
    Tensor video, audio, text;     // f32; text on the host, video/audio on the host or the model's device
    int64_t rows = 0;
    PackedSegments segments; // what VSA tiles (empty: dense attention only)
};
Result<DitPackedInputs> pack_inputs(const DitInputs& in, const DitConfig& config);

struct DitOutputs {
    Tensor sample;       // [Nv, video_patch_dim] f32 (host; the device with outputs_on_device)
    Tensor audio_sample; // [Na, audio_in_channels] f32 (likewise)
};

} // namespace h3::model
