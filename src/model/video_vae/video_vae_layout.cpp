#include "model/video_vae/video_vae_layout.h"

#include <algorithm>

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

} // namespace h3::model
