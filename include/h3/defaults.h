// The released model's numbers that engine options, request fields and benches default to, each defined once
// with its source (public: h3/engine.h shows them; the layers below and the front ends take them from here).
// "spec" is the model specification (h3-model.md of the design documents).
#pragma once

#include <cstdint>

namespace h3 {

// The output canvas: 24 fps video with a 768-px short edge, default 1344×768 (spec overview and §4, whose
// canvas rule caps every aspect at 768·1344 pixels). ref2va video references are resized to the canvas of
// their own aspect at `reference_video_edge`, this short edge by default.
inline constexpr int kCanvasShortEdge = 768;
inline constexpr int kReleaseWidth = 1344, kReleaseHeight = 768;
// 5 s snapped to 17n+5 frames (diffusers' shortest clip, spec §4): the shape of the spec's §14 tables.
inline constexpr int kReleaseFrames = 124;

// ref2va image references' short edge: diffusers' Ref2VA setup step resizes every image reference to a
// 2048-px short edge (`reference_image_short_edge`); `reference_image_edge` lowers it (reduced cost).
inline constexpr int kReferenceImageEdge = 2048;
// The ranges `reference_image_edge` and `reference_video_edge` accept.
inline constexpr int kReferenceEdgeMin = 32, kReferenceImageEdgeMax = 8192, kReferenceVideoEdgeMax = 2048;

// The conditioning rows of the release request the benches time and the memory planner sizes for: the
// official README's Context-IR prompt through the conditioner gives L = 537 rows (spec §12's tiling example
// and §14's FLOP table: 38,247 rows per forward at 1344×768×124).
inline constexpr int kReleasePromptRows = 537;

} // namespace h3
