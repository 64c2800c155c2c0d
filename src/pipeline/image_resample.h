// Pixel-exact image resampling for the reference's image preparation (8-bit RGB, separable, horizontal pass
// first, each pass rounded and clipped to u8):
//   pil_resize          PIL 9.x `Image.resize((w, h), filter)` with the default box and no reducing_gap
//                       (ImagingResample: double coefficients normalised to sum 1, 22-bit fixed point,
//                       +0.5 rounding, clip). LANCZOS is what the fl2va keyframe preparation uses.
//   torch_resize_aa_u8  torch ≥ 2.1's antialiased interpolate on uint8 CPU tensors (bilinear / bicubic, a =
//   −0.5),
//                       which torchvision's v2 `resize` runs for uint8 images (the Qwen2-VL fast image
//                       processor): the same coefficients quantised to int16 at a per-axis precision.
#pragma once

#include "io/image_reader.h"

namespace h3::pipeline {

enum class ResampleFilter { kBox, kBilinear, kHamming, kBicubic, kLanczos };
const char* resample_filter_name(ResampleFilter filter);

// width, height ≥ 1. Same size returns a copy (as PIL and torch do).
io::RgbImage pil_resize(const io::RgbImage& image, int width, int height, ResampleFilter filter);
// filter: kBilinear or kBicubic (H3_CHECK).
io::RgbImage torch_resize_aa_u8(const io::RgbImage& image, int width, int height, ResampleFilter filter);

// The box [left, left+width) × [top, top+height), which must lie inside the image (H3_CHECK).
io::RgbImage crop_image(const io::RgbImage& image, int left, int top, int width, int height);

} // namespace h3::pipeline
