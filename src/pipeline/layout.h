// The packed sequence of a request (spec §5): row order [text | keyframe conditions | audio L | audio R |
// target video] for t2va / fl2va, [text | reference blocks in request order | target audio | target video]
// for ref2va (§5.4: one rotary clock τ from L — an image takes one slot, an audio clip its latent count, a
// video max(soundtrack latents, Σ frame spans) with its soundtrack rows just before its frames); modality
// tags, fractional (t, h, w) RoPE positions in float64 (bit-for-bit the reference's arithmetic), and per-step
// row timesteps.
#pragma once

#include "model/dit/dit_inputs.h"
#include "pipeline/conditioner.h"
#include "pipeline/geometry.h"

#include <cstdint>
#include <vector>

namespace h3::pipeline {

enum class KeyframeAnchor { kFirst, kLast };

// One ref2va reference block, shaped by what the encoders produced for it.
struct ReferenceBlock {
    ReferenceKind kind = ReferenceKind::kImage;
    int latent_frames = 0, latent_h = 0, latent_w = 0; // image (1 frame) and video latents
    int audio_latents = 0; // per channel: an audio clip, or a video's soundtrack (0: none)
};

struct LayoutParams {
    Geometry geometry = {};
    std::vector<int32_t> text_tags = {}; // one per conditioner row (kTagText, or kTagVideo for vision rows)
    std::vector<KeyframeAnchor> keyframes = {};  // fl2va condition blocks in packed order; empty for t2va
    std::vector<ReferenceBlock> references = {}; // ref2va blocks in request order (keyframes then empty)
    // The patch, the audio channel count and the rotary clock (frames per latent, units per frame) are
    // geometry.spec's.
};

struct PackedLayout {
    int64_t text_rows = 0;
    int64_t condition_rows = 0;       // keyframe / reference video rows (leading entries of video_indices)
    int64_t condition_audio_rows = 0; // reference audio rows, clean (leading entries of audio_indices)
    int64_t audio_rows = 0;           // generated audio rows: 2A, channel-major
    int64_t video_rows = 0;           // generated video rows
    int64_t rows = 0;
    // The generated video's token grid (latent frames × h/patch × w/patch); its rows end the sequence.
    int64_t video_t = 0, video_h = 0, video_w = 0;
    bool ref2va = false;           // the [text | reference blocks | audio | video] form (§5.4)
    std::vector<double> positions; // [rows·3] (t, h, w)
    std::vector<int32_t> tags;     // [rows]
    std::vector<int32_t> video_indices, audio_indices, text_indices;
};

PackedLayout build_layout(const LayoutParams& params);

// What video sparse attention tiles (spec §12): the prefix segments text, keyframe rows (every keyframe in
// one segment, as FastVideo packs them) and audio rows (both channels), then the generated video's token
// grid. Empty for ref2va, which has no such form.
model::PackedSegments packed_segments(const PackedLayout& layout);

// The 1-D spatial RoPE grid of an axis of `dim` latents (numpy linspace(left, left+ratio, dim/patch,
// endpoint=False)·32 with s = sqrt(h·w); 32 is the rotary spatial scale, not the canvas multiple).
std::vector<double> spatial_grid(int dim, int patch, double sqrt_area);

// Per-row timesteps reduced to the forward's (sorted unique timesteps, per-row index).
struct RowTimesteps {
    std::vector<float> timesteps;
    std::vector<int32_t> indices;
};
// Text and generated video rows at t_video, keyframe / reference video rows at max(t_video, condition_floor),
// generated audio at t_audio, reference audio rows at 1.0 (clean).
RowTimesteps row_timesteps(const PackedLayout& layout, float t_video, float t_audio,
                           float condition_floor = 0.999f);

} // namespace h3::pipeline
