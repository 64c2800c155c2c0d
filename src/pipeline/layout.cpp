#include "pipeline/layout.h"

#include "core/check.h"
#include "pipeline/conditioner.h"

#include <algorithm>
#include <cmath>

namespace h3::pipeline {

namespace {

constexpr double kRopeSpatialScale = 32.0; // the spatial axes span [0, 32) on a square canvas
constexpr float kCleanTimestep = 1.0f;     // ref2va reference audio rows

// numpy's float64 sum: pairwise_sum (8 partial sums for blocks ≤ 128, recursive halving above). The reference
// sums the keyframe anchor this way; a sequential sum differs in the last ulp from 16 latent frames on.
double numpy_pairwise(const double* a, int64_t n) {
    if (n < 8) {
        double r = 0.0;
        for (int64_t i = 0; i < n; ++i) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; ++j) r[j] = a[j];
        int64_t i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; ++j) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return numpy_pairwise(a, n2) + numpy_pairwise(a + n2, n - n2);
}

double numpy_sum(const std::vector<double>& v) {
    return numpy_pairwise(v.data(), static_cast<int64_t>(v.size()));
}

// The rotary time each latent frame spans: units per pixel frame × the pixel frames it covers (5/3 ·
// (1, 4, 4, 4, 4) for the released VAE).
std::vector<double> latent_spans(const model::LatentSpec& spec, int frames) {
    std::vector<double> s(static_cast<size_t>(frames));
    const double per_frame = spec.rope_units_per_frame();
    for (int i = 0; i < frames; ++i) s[static_cast<size_t>(i)] = per_frame * spec.frames_of_latent(i);
    return s;
}

// Sequential float64 sum of the spans (Python's sum(); the reference advances the ref2va clock this way).
double sequential_sum(const std::vector<double>& v) {
    double r = 0.0;
    for (double x : v) r += x;
    return r;
}

} // namespace

std::vector<double> spatial_grid(int dim, int patch, double sqrt_area) {
    const double ratio = dim / sqrt_area;
    const double left = (1.0 - ratio) / 2.0;
    const int n = dim / patch;
    // numpy linspace(start, stop, n, endpoint=False): step = (stop − start)/n; y = k·step + start.
    const double stop = left + ratio;
    const double step = (stop - left) / n;
    std::vector<double> g(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
        const double y = static_cast<double>(k) * step;
        g[static_cast<size_t>(k)] = (y + left) * kRopeSpatialScale;
    }
    return g;
}

namespace {

PackedLayout build_ref2va_layout(const LayoutParams& p) {
    const Geometry& g = p.geometry;
    const model::LatentSpec& spec = g.spec;
    const int ph = spec.patch_h, pw = spec.patch_w, channels = spec.audio_channels;
    PackedLayout L;
    L.text_rows = static_cast<int64_t>(p.text_tags.size());
    for (const ReferenceBlock& b : p.references) {
        if (b.kind != ReferenceKind::kAudio) {
            H3_CHECK(b.latent_frames >= 1 && b.latent_h % ph == 0 && b.latent_w % pw == 0,
                     "reference latents not divisible by the patch");
            L.condition_rows += static_cast<int64_t>(b.latent_frames) * (b.latent_h / ph) * (b.latent_w / pw);
        }
        L.condition_audio_rows += static_cast<int64_t>(channels) * b.audio_latents;
    }
    L.audio_rows = static_cast<int64_t>(channels) * g.audio_latents;
    L.video_rows = g.latent_frames * g.rows_per_frame();
    L.rows = L.text_rows + L.condition_rows + L.condition_audio_rows + L.audio_rows + L.video_rows;
    L.positions.assign(static_cast<size_t>(L.rows * 3), 0.0);
    L.tags.assign(static_cast<size_t>(L.rows), kTagVideo);
    auto pos = [&](int64_t row, int axis) -> double& {
        return L.positions[static_cast<size_t>(row * 3 + axis)];
    };
    for (int64_t i = 0; i < L.text_rows; ++i) {
        pos(i, 0) = static_cast<double>(i);
        L.text_indices.push_back(static_cast<int32_t>(i));
        L.tags[static_cast<size_t>(i)] = p.text_tags[static_cast<size_t>(i)];
    }
    struct Grid {
        std::vector<double> h, w;
    };
    auto grid_of = [&](int lh, int lw) {
        const double sqrt_area = std::sqrt(static_cast<double>(lh) * lw);
        return Grid{spatial_grid(lh, ph, sqrt_area), spatial_grid(lw, pw, sqrt_area)};
    };
    std::vector<int32_t> cond_video, cond_audio;
    int64_t cursor = L.text_rows;
    // Frames at origin + cumsum(spans)[k−1] (torch cumsum: sequential float64).
    auto put_frames = [&](const Grid& gr, int frames, double origin, std::vector<int32_t>* indices) {
        const std::vector<double> spans = latent_spans(spec, frames);
        double cum = 0.0;
        for (int f = 0; f < frames; ++f) {
            for (double hv : gr.h)
                for (double wv : gr.w) {
                    pos(cursor, 0) = origin + cum;
                    pos(cursor, 1) = hv;
                    pos(cursor, 2) = wv;
                    indices->push_back(static_cast<int32_t>(cursor++));
                }
            cum += spans[static_cast<size_t>(f)];
        }
    };
    // Channel-major audio rows pinned to the two extremes of their block's width grid.
    auto put_audio = [&](int latents, double origin, const std::vector<double>& wg,
                         std::vector<int32_t>* indices) {
        for (int ch = 0; ch < channels; ++ch)
            for (int a = 0; a < latents; ++a) {
                pos(cursor, 0) = origin + static_cast<double>(a);
                pos(cursor, 2) = ch == 0 ? wg.front() : wg.back();
                L.tags[static_cast<size_t>(cursor)] = kTagAudio;
                indices->push_back(static_cast<int32_t>(cursor++));
            }
    };
    const Grid target = grid_of(g.latent_h, g.latent_w);
    double tau = static_cast<double>(L.text_rows);
    for (const ReferenceBlock& b : p.references) {
        switch (b.kind) {
        case ReferenceKind::kImage:
            put_frames(grid_of(b.latent_h, b.latent_w), 1, tau, &cond_video);
            tau += 1.0; // one integer slot, not a latent frame's 5/3
            break;
        case ReferenceKind::kAudio:
            put_audio(b.audio_latents, tau, target.w, &cond_audio);
            tau += static_cast<double>(b.audio_latents);
            break;
        case ReferenceKind::kVideo: {
            const Grid own = grid_of(b.latent_h, b.latent_w);
            put_audio(b.audio_latents, tau, own.w, &cond_audio);
            put_frames(own, b.latent_frames, tau, &cond_video);
            tau += std::max(static_cast<double>(b.audio_latents),
                            sequential_sum(latent_spans(spec, b.latent_frames)));
            break;
        }
        }
    }
    std::vector<int32_t> gen_audio, gen_video;
    put_audio(g.audio_latents, tau, target.w, &gen_audio);
    put_frames(target, g.latent_frames, tau, &gen_video);
    L.ref2va = true;
    L.video_t = g.latent_frames;
    L.video_h = g.latent_h / ph;
    L.video_w = g.latent_w / pw;
    L.video_indices = std::move(cond_video);
    L.video_indices.insert(L.video_indices.end(), gen_video.begin(), gen_video.end());
    L.audio_indices = std::move(cond_audio);
    L.audio_indices.insert(L.audio_indices.end(), gen_audio.begin(), gen_audio.end());
    return L;
}

} // namespace

PackedLayout build_layout(const LayoutParams& p) {
    if (!p.references.empty()) {
        H3_CHECK(p.keyframes.empty(), "a layout has keyframes or references, not both");
        return build_ref2va_layout(p);
    }
    const Geometry& g = p.geometry;
    const model::LatentSpec& spec = g.spec;
    const int ph = spec.patch_h, pw = spec.patch_w;
    H3_CHECK(g.latent_h % ph == 0 && g.latent_w % pw == 0, "latent grid not divisible by the patch");
    const int64_t rpf = g.rows_per_frame();
    PackedLayout L;
    L.text_rows = static_cast<int64_t>(p.text_tags.size());
    L.condition_rows = static_cast<int64_t>(p.keyframes.size()) * rpf;
    L.audio_rows = static_cast<int64_t>(spec.audio_channels) * g.audio_latents;
    L.video_rows = g.latent_frames * rpf;
    L.rows = L.text_rows + L.condition_rows + L.audio_rows + L.video_rows;
    L.video_t = g.latent_frames;
    L.video_h = g.latent_h / ph;
    L.video_w = g.latent_w / pw;
    const int64_t cond0 = L.text_rows, audio0 = cond0 + L.condition_rows, video0 = audio0 + L.audio_rows;
    L.positions.assign(static_cast<size_t>(L.rows * 3), 0.0);
    auto pos = [&](int64_t row, int axis) -> double& {
        return L.positions[static_cast<size_t>(row * 3 + axis)];
    };
    const double text_len = static_cast<double>(L.text_rows);

    for (int64_t i = 0; i < L.text_rows; ++i) pos(i, 0) = static_cast<double>(i);

    const double sqrt_area = std::sqrt(static_cast<double>(g.latent_h) * g.latent_w);
    const std::vector<double> hg = spatial_grid(g.latent_h, ph, sqrt_area);
    const std::vector<double> wg = spatial_grid(g.latent_w, pw, sqrt_area);
    auto put_frame = [&](int64_t first_row, double t) {
        int64_t r = first_row;
        for (double hv : hg)
            for (double wv : wg) {
                pos(r, 0) = t;
                pos(r, 1) = hv;
                pos(r, 2) = wv;
                ++r;
            }
    };

    for (size_t k = 0; k < p.keyframes.size(); ++k) {
        const double t =
            p.keyframes[k] == KeyframeAnchor::kFirst
                ? text_len
                : text_len + numpy_sum(latent_spans(spec, g.latent_frames)) - spec.rope_units_per_frame();
        put_frame(cond0 + static_cast<int64_t>(k) * rpf, t);
    }

    for (int ch = 0; ch < spec.audio_channels; ++ch)
        for (int a = 0; a < g.audio_latents; ++a) {
            const int64_t r = audio0 + static_cast<int64_t>(ch) * g.audio_latents + a;
            pos(r, 0) = text_len + static_cast<double>(a);
            pos(r, 2) = ch == 0 ? wg.front() : wg.back();
        }

    // Latent frame k starts at L + cumsum(spans)[k−1] (torch cumsum: sequential float64).
    double cum = 0.0;
    const std::vector<double> spans = latent_spans(spec, g.latent_frames);
    for (int f = 0; f < g.latent_frames; ++f) {
        put_frame(video0 + f * rpf, text_len + cum);
        cum += spans[static_cast<size_t>(f)];
    }

    L.tags.assign(static_cast<size_t>(L.rows), kTagVideo);
    for (int64_t i = 0; i < L.text_rows; ++i) {
        L.text_indices.push_back(static_cast<int32_t>(i));
        L.tags[static_cast<size_t>(i)] = p.text_tags[static_cast<size_t>(i)];
    }
    for (int64_t r = cond0; r < audio0; ++r) L.video_indices.push_back(static_cast<int32_t>(r));
    for (int64_t r = audio0; r < video0; ++r) {
        L.audio_indices.push_back(static_cast<int32_t>(r));
        L.tags[static_cast<size_t>(r)] = kTagAudio;
    }
    for (int64_t r = video0; r < L.rows; ++r) L.video_indices.push_back(static_cast<int32_t>(r));
    return L;
}

model::PackedSegments packed_segments(const PackedLayout& L) {
    model::PackedSegments seg;
    if (L.ref2va) return seg;
    seg.prefix = {L.text_rows, L.condition_rows, L.audio_rows};
    seg.video_t = L.video_t;
    seg.video_h = L.video_h;
    seg.video_w = L.video_w;
    return seg;
}

RowTimesteps row_timesteps(const PackedLayout& L, float t_video, float t_audio, float condition_floor) {
    const float t_cond = std::max(t_video, condition_floor);
    std::vector<float> row(static_cast<size_t>(L.rows), t_video);
    for (int64_t i = 0; i < L.condition_rows; ++i)
        row[static_cast<size_t>(L.video_indices[static_cast<size_t>(i)])] = t_cond;
    for (size_t i = 0; i < L.audio_indices.size(); ++i)
        row[static_cast<size_t>(L.audio_indices[i])] =
            static_cast<int64_t>(i) < L.condition_audio_rows ? kCleanTimestep : t_audio;
    RowTimesteps out;
    out.timesteps = {t_video, t_audio};
    if (L.condition_rows > 0) out.timesteps.push_back(t_cond);
    if (L.condition_audio_rows > 0) out.timesteps.push_back(kCleanTimestep);
    std::sort(out.timesteps.begin(), out.timesteps.end());
    out.timesteps.erase(std::unique(out.timesteps.begin(), out.timesteps.end()), out.timesteps.end());
    if (L.audio_rows == 0 && t_audio != t_video && t_audio != t_cond &&
        !(L.condition_audio_rows > 0 && t_audio == kCleanTimestep))
        out.timesteps.erase(std::find(out.timesteps.begin(), out.timesteps.end(), t_audio));
    out.indices.resize(row.size());
    for (size_t i = 0; i < row.size(); ++i)
        out.indices[i] = static_cast<int32_t>(
            std::lower_bound(out.timesteps.begin(), out.timesteps.end(), row[i]) - out.timesteps.begin());
    return out;
}

} // namespace h3::pipeline
