#include "pipeline/fl2va.h"

#include <chrono>
#include <cstring>

namespace h3::pipeline {

Result<Fl2vaInputs> prepare_fl2va(const ops::Context& ctx, const model::VideoVaeEncoder& enc,
                                  const PreparedKeyframes& keyframes, const Fl2vaOptions& options) {
    if (keyframes.images.empty()) return invalid_argument("fl2va needs a first and/or a last keyframe");
    if (keyframes.images.size() != keyframes.anchors.size())
        return internal_error("fl2va: keyframe images and anchors differ in count");
    const auto t0 = std::chrono::steady_clock::now();
    Fl2vaInputs out;
    for (size_t i = 0; i < keyframes.images.size(); ++i) {
        const io::RgbImage& im = keyframes.images[i];
        if (im.width != keyframes.canvas.width || im.height != keyframes.canvas.height)
            return invalid_argument(std::string(keyframe_anchor_name(keyframes.anchors[i])) +
                                    " keyframe is " + std::to_string(im.width) + "x" +
                                    std::to_string(im.height) + ", not on the " +
                                    std::to_string(keyframes.canvas.width) + "x" +
                                    std::to_string(keyframes.canvas.height) + " canvas");
        out.images.push_back({im.width, im.height, im.pixels});
    }

    model::VideoEncodeOptions eo = options.encode;
    if (options.cancel) eo.cancel = options.cancel; // inside the encoder too (between tiles)
    for (size_t i = 0; i < keyframes.images.size(); ++i) {
        if (options.cancel && options.cancel->load()) return cancelled("keyframe encoding cancelled");
        const io::RgbImage& im = keyframes.images[i];
        Tensor pixels = Tensor::host(Shape{im.height, im.width, 3}, DType::kU8);
        std::memcpy(pixels.data(), im.pixels.data(), im.pixels.size());
        auto z = model::encode_keyframe(ctx, enc, pixels, eo, options.seed);
        if (!z.ok())
            return z.status().with_context(std::string(keyframe_anchor_name(keyframes.anchors[i])) +
                                           " keyframe");
        out.keyframes.push_back({keyframes.anchors[i], std::move(z).value()});
    }
    out.encode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

} // namespace h3::pipeline
