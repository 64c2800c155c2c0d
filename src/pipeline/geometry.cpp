#include "pipeline/geometry.h"

#include <cmath>
#include <cstdio>

namespace h3::pipeline {

namespace {

// Python's round() on a double: half to even (the default FE_TONEAREST mode of nearbyint).
double round_half_even(double x) {
    return std::nearbyint(x);
}

std::string fmt(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}

Status check_aspect(double r, const std::string& field) {
    if (!(r >= 0.25 && r <= 4.0))
        return invalid_argument(field + " gives the aspect ratio " + fmt(r) +
                                ", outside the supported range [1/4, 4]");
    return ok_status();
}

} // namespace

Result<Canvas> canvas_from_aspect(double aw, double ah, int short_edge) {
    if (!(aw > 0) || !(ah > 0) || !std::isfinite(aw) || !std::isfinite(ah))
        return invalid_argument("aspect " + fmt(aw) + ":" + fmt(ah) + " must have two positive numbers");
    const double r = aw / ah;
    H3_TRY(check_aspect(r, "aspect " + fmt(aw) + ":" + fmt(ah)));
    const double se = short_edge;
    // the area cap keeps the default's 768×1344 proportion for other short edges
    const double max_area = short_edge == kCanvasShortEdge ? static_cast<double>(kCanvasMaxArea)
                                                           : se * se * static_cast<double>(kCanvasMaxArea) /
                                                                 (kCanvasShortEdge * kCanvasShortEdge);
    double w = r >= 1.0 ? se * r : se;
    double h = r >= 1.0 ? se : se / r;
    if (w * h > max_area) {
        const double s = std::sqrt(max_area / (w * h));
        w *= s;
        h *= s;
    }
    Canvas c;
    c.width =
        std::max(kCanvasMultiple, static_cast<int>(round_half_even(w / kCanvasMultiple)) * kCanvasMultiple);
    c.height =
        std::max(kCanvasMultiple, static_cast<int>(round_half_even(h / kCanvasMultiple)) * kCanvasMultiple);
    return c;
}

Result<Canvas> canvas_from_size(int width, int height) {
    for (auto [name, v] : {std::pair{"width", width}, std::pair{"height", height}}) {
        if (v < kCanvasMultiple || v > 4096 || v % kCanvasMultiple != 0)
            return invalid_argument(std::string("size: ") + name + " " + std::to_string(v) +
                                    " must be a multiple of 32 in [32, 4096]");
    }
    H3_TRY(check_aspect(static_cast<double>(width) / height,
                        "size " + std::to_string(width) + "x" + std::to_string(height)));
    return Canvas{width, height};
}

int align_num_frames(int frames) {
    if (frames <= 5) return 5;
    return 17 * ((frames - 5 + 16) / 17) + 5;
}

int latent_frames_for(int aligned_frames) {
    return (aligned_frames - 5) / 17 * 5 + 2;
}

int audio_latents_for(int aligned_frames) {
    return static_cast<int>(round_half_even(static_cast<double>(aligned_frames) / kFps * 40.0));
}

std::string Geometry::describe() const {
    char b[256];
    std::snprintf(b, sizeof b, "%dx%d, %d frames (%.3f s), latents %dx%dx%dx%d, audio %dx%dx%d", width,
                  height, frames, seconds(), kLatentChannels, latent_frames, latent_h, latent_w,
                  kAudioChannels, kAudioLatentChannels, audio_latents);
    return b;
}

Result<Geometry> resolve_geometry(const GeometryRequest& rq) {
    const bool has_size = rq.width.has_value() || rq.height.has_value();
    const bool has_aspect = rq.aspect_w.has_value() || rq.aspect_h.has_value();
    if (has_size && has_aspect) return invalid_argument("size and aspect are exclusive: give one of them");
    if (has_size && !(rq.width && rq.height)) return invalid_argument("size needs both width and height");
    if (has_aspect && !(rq.aspect_w && rq.aspect_h)) return invalid_argument("aspect needs W:H");
    if (rq.frames && rq.seconds)
        return invalid_argument("frames and seconds are exclusive: give one of them");

    Canvas canvas;
    if (has_size) {
        H3_ASSIGN_OR_RETURN(canvas, canvas_from_size(*rq.width, *rq.height));
    } else {
        H3_ASSIGN_OR_RETURN(canvas, canvas_from_aspect(rq.aspect_w.value_or(16), rq.aspect_h.value_or(9)));
    }

    const double lo = rq.limits.min_seconds, hi = rq.limits.max_seconds;
    const int min_frames = align_num_frames(static_cast<int>(std::ceil(lo * kFps)));
    const int max_frames = static_cast<int>(std::floor(hi * kFps));
    char range_buf[160];
    std::snprintf(range_buf, sizeof range_buf, "[%g, %g] s at 24 fps, i.e. %d to %d frames of the form 17n+5",
                  lo, hi, min_frames, 17 * ((max_frames - 5) / 17) + 5);
    const std::string range = range_buf;
    int requested = 0;
    if (rq.seconds) {
        const double s = *rq.seconds;
        if (!std::isfinite(s) || s <= 0 || s > 3600)
            return invalid_argument("seconds " + fmt(s) + " must lie in " + range);
        requested = static_cast<int>(std::ceil(s * kFps - 1e-9));
    } else {
        requested = rq.frames.value_or(124);
        if (requested < 1 || requested > 100000)
            return invalid_argument("frames " + std::to_string(requested) + " must lie in " + range);
    }
    Geometry g;
    g.width = canvas.width;
    g.height = canvas.height;
    g.frames = align_num_frames(requested);
    const double duration = static_cast<double>(g.frames) / kFps;
    if (duration < lo || duration > hi)
        return invalid_argument(
            std::string(rq.seconds ? "seconds " + fmt(*rq.seconds) : "frames " + std::to_string(requested)) +
            " gives " + std::to_string(g.frames) + " frames (" + fmt(duration) +
            " s) after snapping up to 17n+5; the duration must lie in " + range);
    g.latent_frames = latent_frames_for(g.frames);
    g.latent_h = g.height / kVaeSpatial;
    g.latent_w = g.width / kVaeSpatial;
    g.audio_latents = audio_latents_for(g.frames);
    return g;
}

} // namespace h3::pipeline
