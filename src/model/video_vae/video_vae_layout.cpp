#include "model/video_vae/video_vae_layout.h"

#include "ops/tiles.h"

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

Result<Tensor> stitch_tiles(const ops::Context& ctx, const std::vector<std::vector<Tensor>>& tiles,
                            const std::vector<int>& y_overlaps, const std::vector<int>& x_overlaps,
                            BufferPool* pool) {
    const size_t ny = tiles.size(), nx = tiles[0].size();
    std::vector<int64_t> oy(ny + 1, 0), ox(nx + 1, 0); // output offsets of the kept parts
    for (size_t i = 0; i < ny; ++i) oy[i + 1] = oy[i] + tiles[i][0].dim(2) - (i + 1 < ny ? y_overlaps[i] : 0);
    for (size_t j = 0; j < nx; ++j) ox[j + 1] = ox[j] + tiles[0][j].dim(3) - (j + 1 < nx ? x_overlaps[j] : 0);
    const int64_t channels = tiles[0][0].dim(0), frames = tiles[0][0].dim(1);
    const Shape shape{channels, frames, oy[ny], ox[nx]};
    H3_ASSIGN_OR_RETURN(Tensor out, pool && pool->device() == ctx.device
                                        ? pool->take(shape, DType::kF32)
                                        : Tensor::empty(shape, DType::kF32, ctx.device));
    for (size_t i = 0; i < ny; ++i)
        for (size_t j = 0; j < nx; ++j) {
            const Tensor& cur = tiles[i][j];
            const Tensor up = i > 0 ? tiles[i - 1][j] : Tensor();
            const Tensor left = j > 0 ? tiles[i][j - 1] : Tensor();
            ops::BlendTileParams p;
            p.out_y = oy[i], p.out_x = ox[j];
            p.keep_h = oy[i + 1] - oy[i], p.keep_w = ox[j + 1] - ox[j];
            // the reference's blend extents, clipped to both tiles' sizes
            p.blend_y =
                up.defined() ? std::min({up.dim(2), cur.dim(2), static_cast<int64_t>(y_overlaps[i - 1])}) : 0;
            p.blend_x = left.defined()
                            ? std::min({left.dim(3), cur.dim(3), static_cast<int64_t>(x_overlaps[j - 1])})
                            : 0;
            H3_TRY(ops::blend_tile(ctx, p, cur, up, left, out));
        }
    return out;
}

Tensor stitch_tiles(const std::vector<std::vector<Tensor>>& tiles, const std::vector<int>& y_overlaps,
                    const std::vector<int>& x_overlaps) {
    auto r = stitch_tiles(ops::Context::cpu(), tiles, y_overlaps, x_overlaps);
    H3_CHECK(r.ok(), "stitch_tiles on the host: " << r.status().to_string());
    return std::move(r).value();
}

} // namespace h3::model
