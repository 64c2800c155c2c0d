// Decode chunking and tiling of the video VAE (spec §9.3): temporal clips with pre-padding and cross-faded
// overlaps; spatial tiles laid in pixel space with a minimum overlap, the slack spread in latent-sized steps.
#pragma once

#include "core/buffer_pool.h"
#include "core/tensor.h"
#include "ops/context.h"

#include <vector>

namespace h3::model {

// Tiles over `length` pixels: the fewest `tile`-wide tiles whose overlaps are all >= `min_overlap`; the
// leftover is added to the overlaps round-robin in steps of `ratio`. A single tile of `length` when
// length <= tile.
struct TileLayout {
    std::vector<int> starts, lengths, overlaps; // overlaps[i] is between tile i and i+1
};
TileLayout split_tiles(int length, int tile, int min_overlap, int ratio);

// The temporal plan for `latents` latent frames.
struct ClipPlan {
    int pad_tokens = 0;        // repeated last latents appended before decoding
    int num_chunks = 0;        // decoder clips
    std::vector<int> starts;   // first latent of each clip
    int clip_latents = 0;      // latents per clip (tokens_chunk + token_overlap)
    int frame_pre_padding = 0; // frames dropped at the front of every chunk
    int chunk_frames = 0;      // tokens_chunk · temporal ratio (frames per chunk before the pre-padding cut)
    int frame_overlap = 0;     // frames cross-faded between consecutive chunks
    int trim_frames = 0;       // frames removed at the end (from the padding)
    int frames = 0;            // output frames
};
ClipPlan plan_clips(int latents, int clip_length, int temporal_ratio, int token_drop);

// Stitches a grid of host f32 tiles tiles[i][j] [C, F, h_i, w_j] (decoder pixels, or encoder moments in
// latent units): tile (i, j) is blended with the unblended tile above over y_overlaps[i−1] rows, then with
// the unblended tile to the left over x_overlaps[j−1] columns (linear ramps k/e, extents clipped to both
// tiles' sizes), its bottom/right overlaps are cropped, and the kept parts are concatenated: [C, F, Σ kept h,
// Σ kept w]. Every tile goes through ops::blend_tile; the tiles and the result live on ctx's device (the
// result from `pool` when given: a loop over clips then allocates, and frees, nothing).
Result<Tensor> stitch_tiles(const ops::Context& ctx, const std::vector<std::vector<Tensor>>& tiles,
                            const std::vector<int>& y_overlaps, const std::vector<int>& x_overlaps,
                            BufferPool* pool = nullptr);
// The same on the host.
Tensor stitch_tiles(const std::vector<std::vector<Tensor>>& tiles, const std::vector<int>& y_overlaps,
                    const std::vector<int>& x_overlaps);

} // namespace h3::model
