// JSON and text rendering of a CompareReport (conventions in compare_report.h).
#include "pipeline/compare_report.h"

#include <cmath>
#include <cstdio>

namespace h3::pipeline {

nlohmann::ordered_json report_number(double x) {
    if (std::isnan(x)) return nullptr;
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    return x;
}

std::string report_fixed(double x, int digits) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    char b[64];
    std::snprintf(b, sizeof(b), "%.*f", digits, x);
    return b;
}

namespace {

using Json = nlohmann::ordered_json;

Json number(double x) {
    return report_number(x);
}

Json numbers(const std::vector<double>& v) {
    Json a = Json::array();
    for (double x : v) a.push_back(number(x));
    return a;
}

Json metrics_json(const SignalMetrics& m) {
    return Json{{"count", m.count},
                {"cosine", number(m.cosine)},
                {"snr_db", number(m.snr_db)},
                {"rmse", number(m.rmse)},
                {"rms_a", number(m.rms_a)},
                {"rms_b", number(m.rms_b)},
                {"rms_ratio", number(m.rms_ratio)},
                {"rel_rms", number(m.rel_rms)},
                {"max_abs_diff", number(m.max_abs_diff)}};
}

std::string fmt(double x, int digits) {
    return report_fixed(x, digits);
}

std::string sci(double x) {
    if (!std::isfinite(x)) return fmt(x, 0);
    char b[64];
    std::snprintf(b, sizeof(b), "%.3e", x);
    return b;
}

std::string metrics_line(const SignalMetrics& m) {
    return "cosine " + fmt(m.cosine, 6) + "  SNR " + fmt(m.snr_db, 2) + " dB  RMSE " + sci(m.rmse) +
           "  RMS ratio " + fmt(m.rms_ratio, 4) + "  max|A-B| " + sci(m.max_abs_diff);
}

} // namespace

nlohmann::ordered_json compare_report_json(const CompareReport& r) {
    Json j;
    j["kind"] = compare_kind_name(r.kind);
    j["a"] = r.a;
    j["b"] = r.b;
    j["video"] = nullptr;
    j["audio"] = nullptr;
    j["latents"] = nullptr;
    if (r.video) {
        const VideoComparison& v = *r.video;
        j["video"] = Json{{"frames", v.frames},
                          {"frames_a", v.frames_a},
                          {"frames_b", v.frames_b},
                          {"width", v.width},
                          {"height", v.height},
                          {"fps_a", v.fps_a},
                          {"fps_b", v.fps_b},
                          {"psnr_mean", number(v.psnr_mean)},
                          {"psnr_of_mean_mse", number(v.psnr_of_mean_mse)},
                          {"psnr_min", number(v.psnr_min)},
                          {"psnr_min_frame", v.psnr_min_frame},
                          {"ssim_mean", number(v.ssim_mean)},
                          {"ssim_min", number(v.ssim_min)},
                          {"ssim_min_frame", v.ssim_min_frame},
                          {"identical_frames", v.identical_frames},
                          {"psnr_per_frame", numbers(v.psnr)},
                          {"ssim_per_frame", numbers(v.ssim)}};
    }
    if (r.audio) {
        const AudioComparison& a = *r.audio;
        Json ch = Json::array();
        for (const SignalMetrics& m : a.per_channel) ch.push_back(metrics_json(m));
        j["audio"] = Json{{"channels", a.channels},   {"sample_rate", a.sample_rate},
                          {"samples", a.samples},     {"samples_a", a.samples_a},
                          {"samples_b", a.samples_b}, {"overall", metrics_json(a.overall)},
                          {"per_channel", ch}};
    }
    if (r.latents) {
        Json t = Json::array();
        for (const TensorComparison& c : r.latents->tensors) {
            Json e{{"name", c.name}, {"shape", c.shape}};
            e.update(metrics_json(c.metrics));
            t.push_back(e);
        }
        j["latents"] =
            Json{{"tensors", t}, {"only_in_a", r.latents->only_in_a}, {"only_in_b", r.latents->only_in_b}};
    }
    j["warnings"] = r.warnings;
    return j;
}

std::string compare_report_text(const CompareReport& r) {
    std::string s = std::string("compare ") + compare_kind_name(r.kind) + "\n  A (reference): " + r.a +
                    "\n  B:             " + r.b + "\n";
    if (r.video) {
        const VideoComparison& v = *r.video;
        s += "video: " + std::to_string(v.frames) + " frames " + std::to_string(v.width) + "x" +
             std::to_string(v.height) + " at " + fmt(v.fps_a, 3) + " fps";
        if (v.identical_frames) s += ", " + std::to_string(v.identical_frames) + " identical";
        if (v.identical_frames == v.frames)
            s += "\n  PSNR inf dB: every frame is identical\n";
        else
            s += "\n  PSNR mean " + fmt(v.psnr_mean, 3) + " dB (frames that differ), of the mean MSE " +
                 fmt(v.psnr_of_mean_mse, 3) + " dB, min " + fmt(v.psnr_min, 3) + " dB (frame " +
                 std::to_string(v.psnr_min_frame) + ")\n";
        s += "  SSIM mean " + fmt(v.ssim_mean, 6) + ", min " + fmt(v.ssim_min, 6) + " (frame " +
             std::to_string(v.ssim_min_frame) + ")\n";
    }
    if (r.audio) {
        const AudioComparison& a = *r.audio;
        s += "audio: " + std::to_string(a.channels) + " ch at " + std::to_string(a.sample_rate) + " Hz, " +
             std::to_string(a.samples) + " samples per channel\n";
        s += "  all   " + metrics_line(a.overall) + "\n";
        for (size_t c = 0; c < a.per_channel.size(); ++c)
            s += "  ch " + std::to_string(c) + "  " + metrics_line(a.per_channel[c]) + "\n";
    }
    if (r.latents) {
        for (const TensorComparison& c : r.latents->tensors) {
            std::string shape;
            for (int64_t d : c.shape) {
                if (!shape.empty()) shape += 'x';
                shape += std::to_string(d);
            }
            s += c.name + " [" + shape + "]: " + metrics_line(c.metrics) + "  rel-RMS " +
                 sci(c.metrics.rel_rms) + "\n";
        }
    }
    for (const std::string& w : r.warnings) s += "warning: " + w + "\n";
    return s;
}

} // namespace h3::pipeline
