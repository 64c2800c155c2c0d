#include "pipeline/keyframe_image.h"

#include "pipeline/image_resample.h"

#include <algorithm>
#include <cmath>

namespace h3::pipeline {

const char* keyframe_anchor_name(KeyframeAnchor anchor) {
    return anchor == KeyframeAnchor::kFirst ? "first" : "last";
}

CoverPlan cover_plan(int src_width, int src_height, Canvas canvas) {
    // Python: scale = max(W / w0, H / h0); round() is half-to-even on the double product.
    const double scale = std::max(static_cast<double>(canvas.width) / src_width,
                                  static_cast<double>(canvas.height) / src_height);
    CoverPlan p;
    p.resized_width = std::max(canvas.width, static_cast<int>(std::nearbyint(src_width * scale)));
    p.resized_height = std::max(canvas.height, static_cast<int>(std::nearbyint(src_height * scale)));
    p.left = std::max(0, (p.resized_width - canvas.width) / 2);
    p.top = std::max(0, (p.resized_height - canvas.height) / 2);
    return p;
}

io::RgbImage fit_keyframe(const io::RgbImage& image, Canvas canvas, KeyframeFit fit) {
    if (image.width == canvas.width && image.height == canvas.height) return image;
    if (fit == KeyframeFit::kStretch)
        return pil_resize(image, canvas.width, canvas.height, ResampleFilter::kLanczos);
    const CoverPlan p = cover_plan(image.width, image.height, canvas);
    const io::RgbImage resized =
        pil_resize(image, p.resized_width, p.resized_height, ResampleFilter::kLanczos);
    return crop_image(resized, p.left, p.top, canvas.width, canvas.height);
}

Result<Canvas> canvas_for_keyframe(int width, int height, int multiple) {
    auto c = canvas_from_aspect(width, height, multiple);
    if (!c.ok())
        return invalid_argument("keyframe of " + std::to_string(width) + "x" + std::to_string(height) + ": " +
                                c.status().message() + "; give a size to choose the canvas");
    return c;
}

Result<PreparedKeyframes> prepare_keyframes(const KeyframeRequest& request) {
    std::vector<std::pair<const io::RgbImage*, KeyframeAnchor>> frames;
    if (request.first) frames.emplace_back(request.first, KeyframeAnchor::kFirst);
    if (request.last) frames.emplace_back(request.last, KeyframeAnchor::kLast);
    if (frames.empty()) return invalid_argument("fl2va needs a first and/or a last keyframe");
    for (const auto& [img, anchor] : frames)
        if (img->empty())
            return invalid_argument(std::string(keyframe_anchor_name(anchor)) +
                                    " keyframe is an empty image");
    PreparedKeyframes out;
    if (request.canvas) {
        out.canvas = *request.canvas;
    } else {
        if (request.canvas_multiple < 1)
            return internal_error("prepare_keyframes: no canvas multiple (LatentSpec::canvas_multiple)");
        H3_ASSIGN_OR_RETURN(out.canvas, canvas_for_keyframe(frames[0].first->width, frames[0].first->height,
                                                            request.canvas_multiple));
    }
    for (size_t i = 0; i < frames.size(); ++i) {
        out.images.push_back(
            fit_keyframe(*frames[i].first, out.canvas, i == 0 ? KeyframeFit::kStretch : KeyframeFit::kCover));
        out.anchors.push_back(frames[i].second);
    }
    return out;
}

} // namespace h3::pipeline
