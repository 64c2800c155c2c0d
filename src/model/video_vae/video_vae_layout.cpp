#include "model/video_vae/video_vae_layout.h"

#include <algorithm>
#include <cstdint>

namespace h3::model {

TileLayout split_tiles(int length, int tile, int min_overlap, int ratio) {
    TileLayout t;
    if (tile >= length) {
        t.starts = {0};
        t.lengths = {length};
        return t;
    }
    int n = (length + tile - 1) / tile;
    while (tile * n - min_overlap * (n - 1) < length) ++n;
    t.overlaps.assign(static_cast<size_t>(n - 1), min_overlap);
    const int leftover = tile * n - min_overlap * (n - 1) - length;
    for (int i = 0; i < leftover / ratio; ++i) t.overlaps[static_cast<size_t>(i % (n - 1))] += ratio;
    t.starts.push_back(0);
    for (int i = 0; i < n - 1; ++i)
        t.starts.push_back(t.starts.back() + tile - t.overlaps[static_cast<size_t>(i)]);
    t.lengths.assign(static_cast<size_t>(n), tile);
    return t;
}

ClipPlan plan_clips(int latents, int clip_length, int temporal_ratio, int token_drop) {
    ClipPlan p;
    const int r = temporal_ratio;
    p.frame_pre_padding = ((-clip_length) % r + r) % r;
    const int chunk = (clip_length + r - 1) / r;
    const int token_overlap = ((-token_drop) % chunk + chunk) % chunk;
    p.frame_overlap = std::max(token_overlap * r - p.frame_pre_padding, 0);
    p.chunk_frames = chunk * r;
    p.clip_latents = chunk + token_overlap;
    const int tokens = latents + token_drop;
    p.pad_tokens = ((-tokens) % chunk + chunk) % chunk;
    p.num_chunks = (tokens + p.pad_tokens) / chunk - (token_drop > 0 ? 1 : 0);
    if (p.num_chunks < 1) return p;
    for (int i = 0; i < p.num_chunks; ++i) p.starts.push_back(i * chunk);
    // Frames per chunk after the pre-padding cut; the j = 1 part of the last clip is appended as is.
    const int kept = p.chunk_frames - p.frame_pre_padding;
    const int clip_frames = p.clip_latents * r;
    const int tail =
        token_drop > 0
            ? std::max(0, std::min(2 * p.chunk_frames, clip_frames) - p.chunk_frames - p.frame_pre_padding)
            : 0;
    int frames = p.num_chunks * kept + tail;
    if (p.pad_tokens > 0) {
        const int intra_tail = clip_length % r;
        for (int k = 0; k < p.pad_tokens; ++k)
            p.trim_frames += (intra_tail && (latents + k) % chunk == 0) ? intra_tail : r;
    }
    p.frames = frames - p.trim_frames;
    return p;
}

Tensor stitch_tiles(const std::vector<std::vector<Tensor>>& tiles, const std::vector<int>& y_overlaps,
                    const std::vector<int>& x_overlaps) {
    const size_t ny = tiles.size(), nx = tiles[0].size();
    std::vector<int64_t> oy(ny + 1, 0), ox(nx + 1, 0); // output offsets of the kept parts
    for (size_t i = 0; i < ny; ++i) oy[i + 1] = oy[i] + tiles[i][0].dim(2) - (i + 1 < ny ? y_overlaps[i] : 0);
    for (size_t j = 0; j < nx; ++j) ox[j + 1] = ox[j] + tiles[0][j].dim(3) - (j + 1 < nx ? x_overlaps[j] : 0);
    const int64_t channels = tiles[0][0].dim(0), frames = tiles[0][0].dim(1);
    const int64_t height = oy[ny], width = ox[nx], planes = channels * frames;
    Tensor out = Tensor::host(Shape{channels, frames, height, width}, DType::kF32);
    float* dst = out.data_as<float>();
    for (size_t i = 0; i < ny; ++i)
        for (size_t j = 0; j < nx; ++j) {
            const Tensor& cur = tiles[i][j];
            const int64_t th = cur.dim(2), tw = cur.dim(3);
            const int64_t keep_h = oy[i + 1] - oy[i], keep_w = ox[j + 1] - ox[j];
            const Tensor* up = i > 0 ? &tiles[i - 1][j] : nullptr;
            const Tensor* left = j > 0 ? &tiles[i][j - 1] : nullptr;
            const int64_t ey = up ? std::min({up->dim(2), th, static_cast<int64_t>(y_overlaps[i - 1])}) : 0;
            const int64_t ex =
                left ? std::min({left->dim(3), tw, static_cast<int64_t>(x_overlaps[j - 1])}) : 0;
            const float* cp = cur.data_as<const float>();
            const float* upp = up ? up->data_as<const float>() : nullptr;
            const float* lp = left ? left->data_as<const float>() : nullptr;
            const int64_t uh = up ? up->dim(2) : 0, uw = up ? up->dim(3) : 0;
            const int64_t lh = left ? left->dim(2) : 0, lw = left ? left->dim(3) : 0;
            // Every output row is independent: the same per-pixel expressions as the PyTorch blend.
#pragma omp parallel for schedule(static) if (planes * keep_h * keep_w > (1 << 16))
            for (int64_t pr = 0; pr < planes * keep_h; ++pr) {
                const int64_t plane = pr / keep_h, r = pr % keep_h;
                const float* crow = cp + (plane * th + r) * tw;
                const float* urow = r < ey ? upp + (plane * uh + uh - ey + r) * uw : nullptr;
                const float* lrow = ex > 0 ? lp + (plane * lh + r) * lw + lw - ex : nullptr;
                const float wy = r < ey ? static_cast<float>(r) / static_cast<float>(ey) : 1.0f;
                float* orow = dst + (plane * height + oy[i] + r) * width + ox[j];
                for (int64_t col = 0; col < keep_w; ++col) {
                    float v = crow[col];
                    if (urow) v = urow[col] * (1.0f - wy) + v * wy;
                    if (col < ex) {
                        const float wb = static_cast<float>(col) / static_cast<float>(ex);
                        v = lrow[col] * (1.0f - wb) + v * wb;
                    }
                    orow[col] = v;
                }
            }
        }
    return out;
}

} // namespace h3::model
