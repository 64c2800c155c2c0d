// fl2va keyframe preparation (spec §3 step 2; diffusers MiniMaxH3ResizeStep): the keyframes in packed order
// (first, then last; either alone is allowed) are put onto the canvas:
//   - the canvas, unless given, is the 768-short-edge canvas of the aspect of the first keyframe in packed
//   order
//     (canvas_from_aspect(w0, h0), which also enforces the [1/4, 4] aspect range);
//   - a keyframe already at the canvas size is used as it is;
//   - the first keyframe in packed order is stretched: PIL resize((W, H), LANCZOS);
//   - the second is cover-cropped: s = max(W/w0, H/h0), resize to (max(W, round(w0·s)), max(H, round(h0·s)))
//     with LANCZOS (Python round: half to even), crop left = (rw − W)//2, top = (rh − H)//2.
#pragma once

#include "io/image_reader.h"
#include "pipeline/geometry.h"
#include "pipeline/layout.h"

#include <vector>

namespace h3::pipeline {

// KeyframeAnchor (kFirst, kLast) is the layout's (pipeline/layout.h).
enum class KeyframeFit { kStretch, kCover };
const char* keyframe_anchor_name(KeyframeAnchor anchor); // "first", "last"

struct CoverPlan {
    int resized_width = 0, resized_height = 0;
    int left = 0, top = 0;
};
// The reference's cover arithmetic for a w0×h0 source on the canvas.
CoverPlan cover_plan(int src_width, int src_height, Canvas canvas);

// One keyframe onto the canvas (a copy when it already has the canvas size).
io::RgbImage fit_keyframe(const io::RgbImage& image, Canvas canvas, KeyframeFit fit);

// The canvas a keyframe of w×h implies when the request gives no size (sides multiples of `multiple`).
Result<Canvas> canvas_for_keyframe(int width, int height, int multiple);

struct KeyframeRequest {
    const io::RgbImage* first = nullptr; // `image`, anchor "first"
    const io::RgbImage* last = nullptr;  // `last_image`, anchor "last"
    std::optional<Canvas> canvas =
        {};                  // the request's size; otherwise from the first keyframe in packed order
    int canvas_multiple = 0; // LatentSpec::canvas_multiple (needed without `canvas`)
};

struct PreparedKeyframes {
    Canvas canvas;
    std::vector<io::RgbImage> images;    // packed order, each canvas.width × canvas.height
    std::vector<KeyframeAnchor> anchors; // positional with images
};

// Errors: no keyframe, an empty image, an aspect outside [1/4, 4] when the canvas comes from the keyframe.
Result<PreparedKeyframes> prepare_keyframes(const KeyframeRequest& request);

} // namespace h3::pipeline
