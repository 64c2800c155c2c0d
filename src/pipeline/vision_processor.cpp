#include "pipeline/vision_processor.h"

#include "io/json_file.h"
#include "pipeline/image_resample.h"

#include <algorithm>
#include <cmath>

namespace h3::pipeline {

VisionProcessorConfig video_processor_defaults() {
    VisionProcessorConfig c;
    c.min_pixels = 4096;
    c.max_pixels = 25165824;
    return c;
}

Result<VisionProcessorConfig> load_vision_processor_config(const std::string& path,
                                                           const VisionProcessorConfig& defaults) {
    H3_ASSIGN_OR_RETURN(nlohmann::json j, io::read_json_file(path));
    VisionProcessorConfig c = defaults;
    const std::string where = "vision processor config '" + path + "'";
    try {
        if (j.contains("cap_pixels_per_frame") && !j["cap_pixels_per_frame"].is_null())
            c.cap_pixels_per_frame = j["cap_pixels_per_frame"].get<bool>();
        if (j.contains("min_pixels") && !j["min_pixels"].is_null()) {
            H3_ASSIGN_OR_RETURN(
                c.min_pixels, io::json_integer(j["min_pixels"], where + ": min_pixels", 1, int64_t{1} << 40));
        }
        if (j.contains("max_pixels") && !j["max_pixels"].is_null()) {
            H3_ASSIGN_OR_RETURN(
                c.max_pixels, io::json_integer(j["max_pixels"], where + ": max_pixels", 1, int64_t{1} << 40));
        }
        if (j.contains("size") && j["size"].is_object()) {
            const auto& s = j["size"];
            if (s.contains("shortest_edge")) {
                H3_ASSIGN_OR_RETURN(c.min_pixels,
                                    io::json_integer(s["shortest_edge"], where + ": size.shortest_edge", 1,
                                                     int64_t{1} << 40));
            }
            if (s.contains("longest_edge")) {
                H3_ASSIGN_OR_RETURN(
                    c.max_pixels,
                    io::json_integer(s["longest_edge"], where + ": size.longest_edge", 1, int64_t{1} << 40));
            }
        }
        if (j.contains("patch_size"))
            H3_TRY(io::json_int(j["patch_size"], where + ": patch_size", c.patch_size, 1, 1 << 16));
        if (j.contains("temporal_patch_size"))
            H3_TRY(io::json_int(j["temporal_patch_size"], where + ": temporal_patch_size",
                                c.temporal_patch_size, 1, 1 << 16));
        if (j.contains("merge_size"))
            H3_TRY(io::json_int(j["merge_size"], where + ": merge_size", c.merge_size, 1, 1 << 16));
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

namespace {

// Fused rescale + normalise (transformers' fast processors: mean and std divided by the rescale factor, as
// float32, then (x − mean) / std in float32) and patch flattening. `frames` holds grid_t · temporal frames of
// the resized size: rows (t, h/merge, w/merge, merge_h, merge_w), columns (channel, temporal, patch_y,
// patch_x).
Tensor patch_rows(const std::vector<const io::RgbImage*>& frames, const VisionPatches& g,
                  const VisionProcessorConfig& c) {
    const int P = c.patch_size, T = c.temporal_patch_size, M = c.merge_size;
    float mean[3], stdv[3];
    const float inv = static_cast<float>(1.0 / c.rescale_factor);
    for (int ch = 0; ch < 3; ++ch) {
        mean[ch] = static_cast<float>(c.image_mean[ch]) * inv;
        stdv[ch] = static_cast<float>(c.image_std[ch]) * inv;
    }
    const int64_t rows = static_cast<int64_t>(g.grid_t) * g.grid_h * g.grid_w;
    const int64_t cols = 3LL * T * P * P;
    Tensor out = Tensor::host({rows, cols}, DType::kF32);
    float* dst = out.data_as<float>();
    const int gh = g.grid_h / M, gw = g.grid_w / M;
    int64_t r = 0;
    for (int gt = 0; gt < g.grid_t; ++gt)
        for (int bh = 0; bh < gh; ++bh)
            for (int bw = 0; bw < gw; ++bw)
                for (int mh = 0; mh < M; ++mh)
                    for (int mw = 0; mw < M; ++mw, ++r) {
                        float* row = dst + r * cols;
                        const int y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
                        for (int ch = 0; ch < 3; ++ch)
                            for (int t = 0; t < T; ++t) {
                                const io::RgbImage& im = *frames[static_cast<size_t>(gt * T + t)];
                                for (int py = 0; py < P; ++py) {
                                    const uint8_t* src = im.row(y0 + py) + 3 * x0 + ch;
                                    float* o = row + ((static_cast<int64_t>(ch) * T + t) * P + py) * P;
                                    for (int px = 0; px < P; ++px)
                                        o[px] = (static_cast<float>(src[3 * px]) - mean[ch]) / stdv[ch];
                                }
                            }
                    }
    return out;
}

} // namespace

Result<VisionPatches> preprocess_image(const io::RgbImage& image, const VisionProcessorConfig& c) {
    if (image.empty()) return invalid_argument("image processor: empty image");
    const int P = c.patch_size, T = c.temporal_patch_size;
    H3_ASSIGN_OR_RETURN(ResizedSize size, smart_resize(image.height, image.width, P * c.merge_size,
                                                       c.min_pixels, c.max_pixels));
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
    out.pixel_values = patch_rows(std::vector<const io::RgbImage*>(static_cast<size_t>(T), &resized), out, c);
    return out;
}

Result<ResizedSize> video_smart_resize(int num_frames, int height, int width, int temporal_factor, int factor,
                                       int64_t min_pixels, int64_t max_pixels) {
    if (height <= 0 || width <= 0 || factor <= 0 || temporal_factor <= 0)
        return invalid_argument("video processor: empty frames " + std::to_string(width) + "x" +
                                std::to_string(height));
    if (num_frames < temporal_factor)
        return invalid_argument(
            "video processor: " + std::to_string(num_frames) +
            " frame(s); Qwen3-VL's video processor needs at least temporal_patch_size = " +
            std::to_string(temporal_factor));
    int64_t h = height, w = width;
    if (h < factor || w < factor) {
        const double scale = std::max(static_cast<double>(factor) / static_cast<double>(h),
                                      static_cast<double>(factor) / static_cast<double>(w));
        h = static_cast<int64_t>(static_cast<double>(h) * scale);
        w = static_cast<int64_t>(static_cast<double>(w) * scale);
    }
    if (static_cast<double>(std::max(h, w)) / static_cast<double>(std::min(h, w)) > 200)
        return invalid_argument("video processor: aspect ratio of " + std::to_string(width) + "x" +
                                std::to_string(height) + " is more than 200");
    const double f = factor;
    int64_t hb = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) / f)) * factor;
    int64_t wb = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / f)) * factor;
    const int64_t tb =
        static_cast<int64_t>(std::nearbyint(static_cast<double>(num_frames) / temporal_factor)) *
        temporal_factor;
    const double volume = static_cast<double>(int64_t(num_frames) * h * w);
    if (tb * hb * wb > max_pixels) {
        const double beta = std::sqrt(volume / static_cast<double>(max_pixels));
        hb = std::max<int64_t>(factor,
                               static_cast<int64_t>(std::floor(static_cast<double>(h) / beta / f)) * factor);
        wb = std::max<int64_t>(factor,
                               static_cast<int64_t>(std::floor(static_cast<double>(w) / beta / f)) * factor);
    } else if (tb * hb * wb < min_pixels) {
        const double beta = std::sqrt(static_cast<double>(min_pixels) / volume);
        hb = static_cast<int64_t>(std::ceil(static_cast<double>(h) * beta / f)) * factor;
        wb = static_cast<int64_t>(std::ceil(static_cast<double>(w) * beta / f)) * factor;
    }
    return ResizedSize{static_cast<int>(hb), static_cast<int>(wb)};
}

Result<VisionPatches> preprocess_video(const std::vector<io::RgbImage>& frames,
                                       const VisionProcessorConfig& c) {
    if (frames.empty()) return invalid_argument("video processor: the video has no frames");
    const int P = c.patch_size, T = c.temporal_patch_size, M = c.merge_size;
    const int n = static_cast<int>(frames.size());
    for (int i = 0; i < n; ++i) {
        const io::RgbImage& fr = frames[static_cast<size_t>(i)];
        if (fr.empty()) return invalid_argument("video processor: frame " + std::to_string(i) + " is empty");
        if (fr.width != frames[0].width || fr.height != frames[0].height)
            return invalid_argument("video processor: frame " + std::to_string(i) + " is " +
                                    std::to_string(fr.width) + "x" + std::to_string(fr.height) +
                                    ", frame 0 is " + std::to_string(frames[0].width) + "x" +
                                    std::to_string(frames[0].height));
    }
    int64_t max_pixels = c.max_pixels;
    if (c.cap_pixels_per_frame) {
        const int64_t f = int64_t(P) * M;
        const int64_t per_frame = std::max(std::min<int64_t>(768 * f * f, c.max_pixels / n),
                                           static_cast<int64_t>(static_cast<double>(c.min_pixels) * 1.05));
        max_pixels = per_frame * n;
    }
    H3_ASSIGN_OR_RETURN(ResizedSize size, video_smart_resize(n, frames[0].height, frames[0].width, T, P * M,
                                                             c.min_pixels, max_pixels));
    std::vector<io::RgbImage> resized;
    const bool keep = size.height == frames[0].height && size.width == frames[0].width;
    if (!keep) {
        resized.reserve(frames.size());
        for (const io::RgbImage& fr : frames)
            resized.push_back(torch_resize_aa_u8(fr, size.width, size.height, ResampleFilter::kBicubic));
    }
    const std::vector<io::RgbImage>& src = keep ? frames : resized;
    VisionPatches out;
    out.resized_height = size.height;
    out.resized_width = size.width;
    out.grid_t = (n + T - 1) / T;
    out.grid_h = size.height / P;
    out.grid_w = size.width / P;
    // The frame count padded to a multiple of temporal_patch_size with the last frame.
    std::vector<const io::RgbImage*> slots(static_cast<size_t>(out.grid_t) * T);
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = &src[std::min(i, src.size() - 1)];
    out.pixel_values = patch_rows(slots, out, c);
    return out;
}

} // namespace h3::pipeline
