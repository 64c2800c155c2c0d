// The packed sequence of a t2va / fl2va request (spec §5): row order
// [text | keyframe conditions | audio L | audio R | target video], modality tags, fractional (t, h, w)
// RoPE positions in float64 (bit-for-bit the reference's arithmetic), and per-step row timesteps.
#pragma once

#include "pipeline/geometry.h"

#include <cstdint>
#include <vector>

namespace h3::pipeline {

enum class KeyframeAnchor { kFirst, kLast };

struct LayoutParams {
    Geometry geometry = {};
    std::vector<int32_t> text_tags = {}; // one per conditioner row (kTagText, or kTagVideo for vision rows)
    std::vector<KeyframeAnchor> keyframes = {}; // fl2va condition blocks in packed order; empty for t2va
    int patch_h = 2, patch_w = 2;
};

struct PackedLayout {
    int64_t text_rows = 0;
    int64_t condition_rows = 0; // keyframe video rows (leading entries of video_indices)
    int64_t audio_rows = 0;     // 2A, channel-major
    int64_t video_rows = 0;     // generated video rows
    int64_t rows = 0;
    std::vector<double> positions; // [rows·3] (t, h, w)
    std::vector<int32_t> tags;     // [rows]
    std::vector<int32_t> video_indices, audio_indices, text_indices;
};

PackedLayout build_layout(const LayoutParams& params);

// The 1-D spatial RoPE grid of an axis of `dim` latents (numpy linspace(left, left+ratio, dim/patch,
// endpoint=False)·32 with s = sqrt(h·w)).
std::vector<double> spatial_grid(int dim, int patch, double sqrt_area);

// Per-row timesteps reduced to the forward's (sorted unique timesteps, per-row index).
struct RowTimesteps {
    std::vector<float> timesteps;
    std::vector<int32_t> indices;
};
// Text and generated video rows at t_video, keyframe rows at max(t_video, condition_floor), audio at t_audio.
RowTimesteps row_timesteps(const PackedLayout& layout, float t_video, float t_audio,
                           float condition_floor = 0.999f);

} // namespace h3::pipeline
