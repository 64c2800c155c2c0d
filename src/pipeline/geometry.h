// Request geometry (spec §4): the canvas, the frame count snapped to the video VAE's 17n+5, the latent
// shapes and the audio latent count. Every bad field is rejected with its name and the allowed range.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <optional>
#include <string>

namespace h3::pipeline {

inline constexpr int kFps = 24;
inline constexpr int kCanvasMultiple = 32; // VAE stride 16 × patch 2
inline constexpr int kCanvasShortEdge = 768;
inline constexpr int64_t kCanvasMaxArea = 768LL * 1344;
inline constexpr int kVaeSpatial = 16;
inline constexpr int kLatentChannels = 24;
inline constexpr int kAudioChannels = 2; // stereo, channel-major rows
inline constexpr int kAudioLatentChannels = 32;

struct Canvas {
    int width = 0, height = 0;
};

// The 768-short-edge canvas of aspect aw:ah, capped at 768·1344 pixels, each side rounded (half-even) to a
// multiple of 32. The aspect must lie in [1/4, 4]. Another `short_edge` scales the rule (cap
// short_edge²·7/4); only ref2va's reduced-size option uses it.
Result<Canvas> canvas_from_aspect(double aw, double ah, int short_edge = kCanvasShortEdge);
// An explicit size: both sides multiples of 32 in [32, 4096], aspect in [1/4, 4].
Result<Canvas> canvas_from_size(int width, int height);

// The smallest 17n+5 ≥ frames (frames ≥ 1).
int align_num_frames(int frames);
// Latent frames of an aligned frame count: 5n+2.
int latent_frames_for(int aligned_frames);
// Audio latents per channel: round_half_even(F/24·40).
int audio_latents_for(int aligned_frames);

struct GeometryLimits {
    double min_seconds = 4.0; // SGLang / official README (diffusers uses 5)
    double max_seconds = 15.0;
};

struct GeometryRequest {
    std::optional<int> width = {}, height = {};         // --size WxH
    std::optional<double> aspect_w = {}, aspect_h = {}; // --aspect W:H (default 16:9 when neither is given)
    std::optional<int> frames = {};                     // --frames F
    std::optional<double> seconds = {};                 // --seconds S (F = ceil(S·24) before snapping)
    GeometryLimits limits = {};
};

struct Geometry {
    int width = 0, height = 0;      // pixels
    int frames = 0;                 // aligned, 17n+5
    int latent_frames = 0;          // T
    int latent_h = 0, latent_w = 0; // H/16, W/16
    int audio_latents = 0;          // A per channel
    double seconds() const { return static_cast<double>(frames) / kFps; }
    int64_t rows_per_frame(int patch_h = 2, int patch_w = 2) const {
        return static_cast<int64_t>(latent_h / patch_h) * (latent_w / patch_w);
    }
    std::string describe() const; // "1344x768, 124 frames (5.17 s), latents 24x37x48x84, audio 2x32x207"
};

Result<Geometry> resolve_geometry(const GeometryRequest& request);

} // namespace h3::pipeline
