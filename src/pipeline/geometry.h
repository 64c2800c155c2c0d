// Request geometry (spec §4): the canvas, the frame count snapped to the video VAE's chunking, the latent
// shapes and the audio latent count. The model's numbers (canvas multiple, 17n+5 → 5n+2, latent channels,
// audio latents per second) come from the checkpoint's model::LatentSpec; this file holds the request policy
// only (the 768 short edge and its area cap, the aspect range, the duration limits). Every bad field is
// rejected with its name and the allowed range.
#pragma once

#include "core/status.h"
#include "model/latent_spec.h"

#include <h3/defaults.h>

#include <cstdint>
#include <optional>
#include <string>

namespace h3::pipeline {

inline constexpr int kFps = model::kVideoFps;
// kCanvasShortEdge (768), the release canvas and frames: h3/defaults.h
inline constexpr int64_t kCanvasMaxArea = int64_t{kReleaseWidth} * kReleaseHeight;
inline constexpr int kCanvasMaxSide = 4096;

struct Canvas {
    int width = 0, height = 0;
};

// The 768-short-edge canvas of aspect aw:ah, capped at 768·1344 pixels, each side rounded (half-even) to a
// multiple of `multiple` (LatentSpec::canvas_multiple). The aspect must lie in [1/4, 4]. Another `short_edge`
// scales the rule (cap short_edge²·7/4); only ref2va's reduced-size option uses it.
Result<Canvas> canvas_from_aspect(double aw, double ah, int multiple, int short_edge = kCanvasShortEdge);
// An explicit size: both sides multiples of `multiple` in [multiple, 4096], aspect in [1/4, 4].
Result<Canvas> canvas_from_size(int width, int height, int multiple);

struct GeometryLimits {
    double min_seconds = 4.0; // SGLang / official README (diffusers uses 5)
    double max_seconds = 15.0;
};

struct GeometryRequest {
    std::optional<int> width = {}, height = {};         // size WxH
    std::optional<double> aspect_w = {}, aspect_h = {}; // aspect W:H (default 16:9 when neither is given)
    std::optional<int> frames = {};                     // frames F
    std::optional<double> seconds = {};                 // seconds S (F = ceil(S·24) before snapping)
    GeometryLimits limits = {};
};

struct Geometry {
    model::LatentSpec spec;         // the checkpoint's, which the numbers below follow
    int width = 0, height = 0;      // pixels
    int frames = 0;                 // aligned (17n+5)
    int latent_frames = 0;          // T (5n+2)
    int latent_h = 0, latent_w = 0; // H, W over the VAE's spatial compression
    int audio_latents = 0;          // A per channel
    double seconds() const { return static_cast<double>(frames) / spec.fps; }
    int64_t rows_per_frame() const {
        return static_cast<int64_t>(latent_h / spec.patch_h) * (latent_w / spec.patch_w);
    }
    std::string describe() const; // "1344x768, 124 frames (5.17 s), latents 24x37x48x84, audio 2x32x207"
};

// `field` (optional) receives the request field an error is about: size, aspect, frames or seconds.
Result<Geometry> resolve_geometry(const GeometryRequest& request, const model::LatentSpec& spec,
                                  std::string* field = nullptr);

} // namespace h3::pipeline
