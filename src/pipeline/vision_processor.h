// The Qwen2-VL/Qwen3-VL image processor as the reference runs it for fl2va keyframes (spec §8.2): the
// official processor/preprocessor_config.json names `Qwen2VLImageProcessorFast` (transformers' torchvision
// path). Per image:
//   1. smart_resize: factor = patch·merge (32); h̄ = round(h/f)·f, w̄ = round(w/f)·f (half-even); above
//      max_pixels: β = sqrt(h·w/max), h̄ = max(f, ⌊h/β/f⌋·f), w̄ likewise; below min_pixels: β =
//      sqrt(min/(h·w)), h̄ = ⌈h·β/f⌉·f, w̄ likewise; aspect > 200 is rejected.
//   2. resize when the size changes: torchvision v2 resize of a uint8 tensor, BICUBIC, antialias=True →
//      torch's native uint8 antialiased kernel (pipeline/image_resample.h, torch_resize_aa_u8). Canvas-sized
//      keyframes (multiples of 32, ≥ 65536 pixels) are never resized.
//   3. fused rescale + normalise in float32: (x − mean/rescale) / (std/rescale), i.e. (x − 127.5) / 127.5.
//   4. the single image repeated temporal_patch times, then patch rows in the order
//      (t, h/merge, w/merge, merge_h, merge_w) × columns (channel, temporal, patch_y, patch_x).
//
// Videos (ref2va, spec §8.2): transformers' Qwen3VLVideoProcessor with do_sample_frames=False on the frames
// the caller sampled (2 fps); the official processor/video_preprocessor_config.json gives min/max pixels 4096
// / 25165824 over the whole clip. Per video (all frames one size):
//   1. smart_resize over the clip (video_smart_resize): a side < factor first scales the frame up to it
//      (int(side·max(f/h, f/w))); h̄, w̄ as for images, t̄ = round(T/temporal)·temporal (half-even); the
//      bounds compare t̄·h̄·w̄ and β uses T·h·w; fewer than temporal_patch frames is an error (as there).
//      cap_pixels_per_frame (off unless the config sets it: transformers' default when unset up to 5.21; 5.17
//      warns that 5.22 makes the cap the default) caps max_pixels at max(min(768·f², max // T),
//      int(1.05·min))·T first.
//   2. every frame resized like an image (torch's uint8 antialiased bicubic), then (x − 127.5) / 127.5;
//   3. the frame count padded to a multiple of temporal_patch by repeating the last frame; grid_t = frames /
//      temporal; rows (t, h/merge, w/merge, merge_h, merge_w) × columns (channel, temporal, patch_y,
//      patch_x), the temporal column taking frames t·temporal … t·temporal + temporal − 1.
#pragma once

#include "core/tensor.h"
#include "io/image_reader.h"

#include <array>
#include <string>
#include <vector>

namespace h3::pipeline {

struct VisionProcessorConfig {
    int patch_size = 16;
    int temporal_patch_size = 2;
    int merge_size = 2;
    int64_t min_pixels = 65536;    // size.shortest_edge
    int64_t max_pixels = 16777216; // size.longest_edge
    double rescale_factor = 1.0 / 255.0;
    std::array<double, 3> image_mean = {0.5, 0.5, 0.5};
    std::array<double, 3> image_std = {0.5, 0.5, 0.5};
    bool cap_pixels_per_frame = false; // videos only (see above)
};

// The official video processor (processor/video_preprocessor_config.json): min/max pixels 4096 / 25165824.
VisionProcessorConfig video_processor_defaults();

// Reads processor/preprocessor_config.json or video_preprocessor_config.json (size.shortest_edge/longest_edge
// or min_pixels/max_pixels, patch_size, temporal_patch_size, merge_size, image_mean, image_std,
// rescale_factor, cap_pixels_per_frame); absent keys keep `defaults` (the official image processor's values
// unless given).
Result<VisionProcessorConfig> load_vision_processor_config(const std::string& path,
                                                           const VisionProcessorConfig& defaults = {});

struct ResizedSize {
    int height = 0, width = 0;
};
Result<ResizedSize> smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels);
// The video processor's smart_resize over `num_frames` frames (step 1 above).
Result<ResizedSize> video_smart_resize(int num_frames, int height, int width, int temporal_factor, int factor,
                                       int64_t min_pixels, int64_t max_pixels);

struct VisionPatches {
    Tensor pixel_values; // [grid_t·grid_h·grid_w, 3·temporal·patch·patch] f32
    int grid_t = 0, grid_h = 0, grid_w = 0;
    int resized_height = 0, resized_width = 0;
    // <|image_pad|> tokens of this image: grid_t·grid_h·grid_w / merge²
    int64_t num_tokens(int merge_size) const {
        return static_cast<int64_t>(grid_t) * grid_h * grid_w / (merge_size * merge_size);
    }
    // Tokens of one temporal slice (a video's vision block in the LM): grid_h·grid_w / merge²
    int64_t block_tokens(int merge_size) const {
        return static_cast<int64_t>(grid_h) * grid_w / (merge_size * merge_size);
    }
};

Result<VisionPatches> preprocess_image(const io::RgbImage& image, const VisionProcessorConfig& config = {});
// `frames`: one video's frames in order, all the same size (errors name the frame). grid_t = ⌈T / temporal⌉.
Result<VisionPatches> preprocess_video(const std::vector<io::RgbImage>& frames,
                                       const VisionProcessorConfig& config = video_processor_defaults());

} // namespace h3::pipeline
