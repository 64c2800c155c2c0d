// Tile and clip assembly of the tiled video VAE (spec §9.3) on tensors, so decoded tiles can be stitched
// where they were decoded, and encoder input tiles cut where the clip was uploaded. See ops.h for the shared
// conventions. All f32, [C, F, H, W] contiguous.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// The kept part of one tile, blended with its unblended upper and left neighbours, into the stitched output:
// for r < keep_h, c < keep_w (every plane p = channel·F + frame)
//   v = cur[p, r, c]
//   r < blend_y:  v = up[p, up_h − blend_y + r, c]·(1 − r/blend_y) + v·(r/blend_y)
//   c < blend_x:  v = left[p, r, left_w − blend_x + c]·(1 − c/blend_x) + v·(c/blend_x)
//   out[p, out_y + r, out_x + c] = v
// Products and sums rounded in fp32 (no fused multiply-add): CPU and CUDA agree bit for bit.
struct BlendTileParams {
    int64_t out_y = 0, out_x = 0;     // where the kept part lands in `out`
    int64_t keep_h = 0, keep_w = 0;   // the kept extent (the tile's bottom / right overlaps cropped)
    int64_t blend_y = 0, blend_x = 0; // rows blended with `up`, columns blended with `left` (0: none)
};
// cur [C, F, th, tw] (th >= keep_h, tw >= keep_w); up [C, F, uh, uw] with uh >= blend_y, uw >= keep_w
// (undefined when blend_y == 0); left [C, F, lh, lw] with lh >= keep_h, lw >= blend_x (undefined when
// blend_x == 0); out [C, F, H, W] with out_y + keep_h <= H, out_x + keep_w <= W.
Status blend_tile(const Context& ctx, const BlendTileParams& p, const Tensor& cur, const Tensor& up,
                  const Tensor& left, Tensor& out);

// `frames` frames of src into out, those below `fade` cross-faded from prev along a ramp of `fade` frames:
//   k < fade:  out[c, out_frame + k] = prev[c, prev_frame + k]·(1 − k/fade) + src[c, src_frame + k]·(k/fade)
//   else:      out[c, out_frame + k] = src[c, src_frame + k]
// (rounded like blend_tile; fade may exceed frames: the ramp is then cut short). src [C, Fs, H, W], prev
// [C, Fp, H, W] (undefined when fade == 0), out [C, Fo, H, W]; the frame ranges must lie inside their
// tensors.
struct CrossfadeParams {
    int64_t frames = 0, src_frame = 0, out_frame = 0;
    int64_t fade = 0, prev_frame = 0;
};
Status crossfade_frames(const Context& ctx, const CrossfadeParams& p, const Tensor& src, const Tensor& prev,
                        Tensor& out);

// One tile cut out of a frame stack (the tiled encoder's input tiles):
//   out[c, f, r, col] = src[c, f, y0 + r, x0 + col]
// src [C, F, H, W], out [C, F, h, w] with y0 + h <= H and x0 + w <= W. A plain copy: CPU and CUDA agree bit
// for bit.
struct CropTileParams {
    int64_t y0 = 0, x0 = 0; // the tile's top-left corner in src
};
Status crop_tile(const Context& ctx, const CropTileParams& p, const Tensor& src, Tensor& out);

} // namespace h3::ops
