#include "pipeline/vision_processor.h"

#include "io/json_file.h"
#include "pipeline/image_resample.h"

#include <cmath>

namespace h3::pipeline {

Result<VisionProcessorConfig> load_vision_processor_config(const std::string& path) {
    H3_ASSIGN_OR_RETURN(nlohmann::json j, io::read_json_file(path));
    VisionProcessorConfig c;
    const std::string where = "image processor config '" + path + "'";
    try {
        if (j.contains("min_pixels") && !j["min_pixels"].is_null())
            c.min_pixels = j["min_pixels"].get<int64_t>();
        if (j.contains("max_pixels") && !j["max_pixels"].is_null())
            c.max_pixels = j["max_pixels"].get<int64_t>();
        if (j.contains("size") && j["size"].is_object()) {
            const auto& s = j["size"];
            if (s.contains("shortest_edge")) c.min_pixels = s["shortest_edge"].get<int64_t>();
            if (s.contains("longest_edge")) c.max_pixels = s["longest_edge"].get<int64_t>();
        }
        if (j.contains("patch_size")) c.patch_size = j["patch_size"].get<int>();
        if (j.contains("temporal_patch_size")) c.temporal_patch_size = j["temporal_patch_size"].get<int>();
        if (j.contains("merge_size")) c.merge_size = j["merge_size"].get<int>();
        if (j.contains("rescale_factor")) c.rescale_factor = j["rescale_factor"].get<double>();
        for (const char* key : {"image_mean", "image_std"}) {
            if (!j.contains(key)) continue;
            const auto v = j[key].get<std::vector<double>>();
            if (v.size() != 3) return bad_input(where + ": " + key + " must have 3 values");
            auto& dst = std::string(key) == "image_mean" ? c.image_mean : c.image_std;
            for (int i = 0; i < 3; ++i) dst[i] = v[i];
        }
    } catch (const nlohmann::json::exception& e) {
        return bad_input(where + ": " + e.what());
    }
    if (c.patch_size < 1 || c.temporal_patch_size < 1 || c.merge_size < 1 || c.min_pixels < 0 ||
        c.max_pixels < c.min_pixels || !(c.rescale_factor > 0))
        return bad_input(where + ": patch/merge sizes must be positive and min_pixels ≤ max_pixels");
    for (double s : c.image_std)
        if (s == 0) return bad_input(where + ": image_std has a zero");
    return c;
}

Result<ResizedSize> smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels) {
    if (height <= 0 || width <= 0 || factor <= 0)
        return invalid_argument("smart_resize: empty image " + std::to_string(width) + "x" +
                                std::to_string(height));
    if (static_cast<double>(std::max(height, width)) / std::min(height, width) > 200)
        return invalid_argument("image processor: aspect ratio of " + std::to_string(width) + "x" +
                                std::to_string(height) + " is more than 200");
    const double f = factor;
    int64_t h = static_cast<int64_t>(std::nearbyint(height / f)) * factor;
    int64_t w = static_cast<int64_t>(std::nearbyint(width / f)) * factor;
    if (h * w > max_pixels) {
        const double beta = std::sqrt(static_cast<double>(static_cast<int64_t>(height) * width) / max_pixels);
        h = std::max<int64_t>(factor, static_cast<int64_t>(std::floor(height / beta / f)) * factor);
        w = std::max<int64_t>(factor, static_cast<int64_t>(std::floor(width / beta / f)) * factor);
    } else if (h * w < min_pixels) {
        const double beta =
            std::sqrt(static_cast<double>(min_pixels) / (static_cast<double>(height) * width));
        h = static_cast<int64_t>(std::ceil(height * beta / f)) * factor;
        w = static_cast<int64_t>(std::ceil(width * beta / f)) * factor;
    }
    return ResizedSize{static_cast<int>(h), static_cast<int>(w)};
}

Result<VisionPatches> preprocess_image(const io::RgbImage& image, const VisionProcessorConfig& c) {
    if (image.empty()) return invalid_argument("image processor: empty image");
    const int P = c.patch_size, T = c.temporal_patch_size, M = c.merge_size;
    H3_ASSIGN_OR_RETURN(ResizedSize size,
                        smart_resize(image.height, image.width, P * M, c.min_pixels, c.max_pixels));
    const io::RgbImage resized =
        (size.height == image.height && size.width == image.width)
            ? image
            : torch_resize_aa_u8(image, size.width, size.height, ResampleFilter::kBicubic);
    VisionPatches out;
    out.resized_height = size.height;
    out.resized_width = size.width;
    out.grid_t = 1; // one image, repeated temporal_patch_size times
    out.grid_h = size.height / P;
    out.grid_w = size.width / P;
    // Fused rescale + normalise (transformers' fast processors): mean and std divided by the rescale factor,
    // as float32 tensors, then (x − mean) / std in float32.
    float mean[3], stdv[3];
    const float inv = static_cast<float>(1.0 / c.rescale_factor);
    for (int ch = 0; ch < 3; ++ch) {
        mean[ch] = static_cast<float>(c.image_mean[ch]) * inv;
        stdv[ch] = static_cast<float>(c.image_std[ch]) * inv;
    }
    const int64_t rows = static_cast<int64_t>(out.grid_t) * out.grid_h * out.grid_w;
    const int64_t cols = 3LL * T * P * P;
    out.pixel_values = Tensor::host({rows, cols}, DType::kF32);
    float* dst = out.pixel_values.data_as<float>();
    const int gh = out.grid_h / M, gw = out.grid_w / M;
    int64_t r = 0;
    for (int bh = 0; bh < gh; ++bh)
        for (int bw = 0; bw < gw; ++bw)
            for (int mh = 0; mh < M; ++mh)
                for (int mw = 0; mw < M; ++mw, ++r) {
                    float* row = dst + r * cols;
                    const int y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
                    for (int ch = 0; ch < 3; ++ch)
                        for (int t = 0; t < T; ++t)
                            for (int py = 0; py < P; ++py) {
                                const uint8_t* src = resized.row(y0 + py) + 3 * x0 + ch;
                                float* o = row + ((static_cast<int64_t>(ch) * T + t) * P + py) * P;
                                for (int px = 0; px < P; ++px)
                                    o[px] = (static_cast<float>(src[3 * px]) - mean[ch]) / stdv[ch];
                            }
                }
    return out;
}

} // namespace h3::pipeline
