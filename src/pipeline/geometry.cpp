#include "pipeline/geometry.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

Result<Canvas> canvas_from_aspect(double aw, double ah, int multiple, int short_edge) {
    if (!(aw > 0) || !(ah > 0) || !std::isfinite(aw) || !std::isfinite(ah))
        return invalid_argument("aspect " + fmt(aw) + ":" + fmt(ah) + " must have two positive numbers");
    if (multiple < 1)
        return internal_error("canvas_from_aspect: canvas multiple " + std::to_string(multiple));
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
    c.width = std::max(multiple, static_cast<int>(round_half_even(w / multiple)) * multiple);
    c.height = std::max(multiple, static_cast<int>(round_half_even(h / multiple)) * multiple);
    return c;
}

Result<Canvas> canvas_from_size(int width, int height, int multiple) {
    if (multiple < 1) return internal_error("canvas_from_size: canvas multiple " + std::to_string(multiple));
    const int top = kCanvasMaxSide / multiple * multiple;
    // the nearest valid side: the closest multiple in [multiple, top]
    const auto nearest = [&](int v) {
        const int64_t r = (static_cast<int64_t>(v) + multiple / 2) / multiple * multiple;
        return static_cast<int>(std::clamp<int64_t>(r, multiple, top));
    };
    for (auto [name, v] : {std::pair{"width", width}, std::pair{"height", height}}) {
        if (v < multiple || v > top || v % multiple != 0)
            return invalid_argument(std::string("size: ") + name + " " + std::to_string(v) +
                                    " must be a multiple of " + std::to_string(multiple) + " in [" +
                                    std::to_string(multiple) + ", " + std::to_string(top) +
                                    "]; the nearest valid size is " + std::to_string(nearest(width)) + "x" +
                                    std::to_string(nearest(height)));
    }
    H3_TRY(check_aspect(static_cast<double>(width) / height,
                        "size " + std::to_string(width) + "x" + std::to_string(height)));
    return Canvas{width, height};
}

std::string Geometry::describe() const {
    char b[256];
    std::snprintf(b, sizeof b, "%dx%d, %d frames (%.3f s), latents %dx%dx%dx%d, audio %dx%dx%d", width,
                  height, frames, seconds(), spec.latent_channels, latent_frames, latent_h, latent_w,
                  spec.audio_channels, spec.audio_latent_channels, audio_latents);
    return b;
}

Result<Geometry> resolve_geometry(const GeometryRequest& rq, const model::LatentSpec& spec,
                                  std::string* field) {
    const auto fail = [&](const char* f, Status s) -> Status {
        if (field) *field = f;
        return s;
    };
    const bool has_size = rq.width.has_value() || rq.height.has_value();
    const bool has_aspect = rq.aspect_w.has_value() || rq.aspect_h.has_value();
    if (has_size && has_aspect)
        return fail("size", invalid_argument("size and aspect are exclusive: give one of them"));
    if (has_size && !(rq.width && rq.height))
        return fail("size", invalid_argument("size needs both width and height"));
    if (has_aspect && !(rq.aspect_w && rq.aspect_h))
        return fail("aspect", invalid_argument("aspect needs W:H"));
    if (rq.frames && rq.seconds)
        return fail("frames", invalid_argument("frames and seconds are exclusive: give one of them"));

    const int multiple = spec.canvas_multiple();
    Result<Canvas> canvas =
        has_size ? canvas_from_size(*rq.width, *rq.height, multiple)
                 : canvas_from_aspect(rq.aspect_w.value_or(16), rq.aspect_h.value_or(9), multiple);
    if (!canvas.ok()) return fail(has_aspect ? "aspect" : "size", canvas.status());

    const double lo = rq.limits.min_seconds, hi = rq.limits.max_seconds;
    const int C = spec.frames_per_chunk, L = spec.latents_per_chunk;
    const int min_frames = spec.align_frames(static_cast<int>(std::ceil(lo * spec.fps)));
    const int max_frames = static_cast<int>(std::floor(hi * spec.fps));
    char range_buf[192];
    std::snprintf(range_buf, sizeof range_buf,
                  "[%g, %g] s at %d fps, i.e. %d to %d frames of the form %dn+%d", lo, hi, spec.fps,
                  min_frames, C * ((max_frames - L) / C) + L, C, L);
    const std::string range = range_buf;
    const char* time_field = rq.seconds ? "seconds" : "frames";
    int requested = 0;
    if (rq.seconds) {
        const double s = *rq.seconds;
        if (!std::isfinite(s) || s <= 0 || s > 3600)
            return fail(time_field, invalid_argument("seconds " + fmt(s) + " must lie in " + range));
        requested = static_cast<int>(std::ceil(s * spec.fps - 1e-9));
    } else {
        requested = rq.frames.value_or(124);
        if (requested < 1 || requested > 100000)
            return fail(time_field,
                        invalid_argument("frames " + std::to_string(requested) + " must lie in " + range));
    }
    Geometry g;
    g.spec = spec;
    g.width = canvas->width;
    g.height = canvas->height;
    g.frames = spec.align_frames(requested);
    const double duration = static_cast<double>(g.frames) / spec.fps;
    if (duration < lo || duration > hi)
        return fail(time_field,
                    invalid_argument(std::string(rq.seconds ? "seconds " + fmt(*rq.seconds)
                                                            : "frames " + std::to_string(requested)) +
                                     " gives " + std::to_string(g.frames) + " frames (" + fmt(duration) +
                                     " s) after snapping up to " + std::to_string(C) + "n+" +
                                     std::to_string(L) + "; the duration must lie in " + range));
    g.latent_frames = spec.latent_frames(g.frames);
    g.latent_h = g.height / spec.spatial_compression;
    g.latent_w = g.width / spec.spatial_compression;
    g.audio_latents = spec.audio_latents(g.frames);
    return g;
}

} // namespace h3::pipeline
