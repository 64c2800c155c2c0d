// The video VAE decode on a device group (issue #17): every rank decodes its share of each clip's tiles
// (model::VideoDecodeOptions::group), rank 0 gathers and blends them into the frames. The audio decode is
// not split (it stays on rank 0).
#pragma once

#include "model/video_vae/video_vae.h"
#include "runtime/device_group.h"

#include <atomic>
#include <functional>

namespace h3::pipeline {

// latents [1, C, T, h, w] → RGB8 frames [F, H, W, 3] on the host where this process holds rank 0 (bit for
// bit the single-rank decode), else an undefined tensor. The ranks of one process share `vae`'s weights;
// each keeps its own work buffers. `on_clip` (optional) is called by the rank-0 thread after each clip. With
// `frames_sink` rank 0 hands the frames over clip by clip instead (model::VideoDecodeOptions::frames_sink)
// and the result is undefined.
Result<Tensor> decode_video_on_group(runtime::DeviceGroup& group, const model::VideoVae& vae,
                                     const Tensor& latents, const std::atomic<bool>* cancel = nullptr,
                                     std::function<void(int clips_done, int clips)> on_clip = {},
                                     std::function<Status(Tensor)> frames_sink = {});

} // namespace h3::pipeline
