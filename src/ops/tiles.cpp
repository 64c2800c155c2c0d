// blend_tile / crossfade_frames / crop_tile dispatchers: validation, then the CPU reference or the CUDA
// implementation.
#include "ops/tiles.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <algorithm>

namespace h3::ops {

using namespace detail;

namespace {

std::string num(int64_t v) {
    return std::to_string(v);
}

Status same_planes(const char* op, const char* name, const Tensor& t, const Tensor& ref) {
    if (t.dim(0) != ref.dim(0) || t.dim(1) != ref.dim(1))
        return invalid_argument(std::string(op) + ": " + name + " is " + desc(t) + " but out is " +
                                desc(ref) + " (channels and frames must match)");
    return ok_status();
}

} // namespace

Status blend_tile(const Context& ctx, const BlendTileParams& p, const Tensor& cur, const Tensor& up,
                  const Tensor& left, Tensor& out) {
    const char* op = "blend_tile";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "cur", ctx, cur, 4));
    H3_TRY(check_f32_contig(op, "out", ctx, out, 4));
    H3_TRY(check_writable(op, "out", out));
    H3_TRY(same_planes(op, "cur", cur, out));
    if (p.keep_h < 0 || p.keep_w < 0 || p.blend_y < 0 || p.blend_x < 0 || p.out_y < 0 || p.out_x < 0)
        return invalid_argument("blend_tile: extents and offsets must be >= 0");
    if (p.keep_h > cur.dim(2) || p.keep_w > cur.dim(3))
        return invalid_argument("blend_tile: keeps " + num(p.keep_h) + "×" + num(p.keep_w) + " of the tile " +
                                desc(cur));
    if (p.out_y + p.keep_h > out.dim(2) || p.out_x + p.keep_w > out.dim(3))
        return invalid_argument("blend_tile: the kept " + num(p.keep_h) + "×" + num(p.keep_w) + " at (" +
                                num(p.out_y) + ", " + num(p.out_x) + ") leaves out " + desc(out));
    if (p.blend_y > 0) {
        H3_TRY(check_f32_contig(op, "up", ctx, up, 4));
        H3_TRY(same_planes(op, "up", up, out));
        if (up.dim(2) < p.blend_y || up.dim(3) < p.keep_w)
            return invalid_argument("blend_tile: up is " + desc(up) + ", it needs >= " + num(p.blend_y) +
                                    " rows and >= " + num(p.keep_w) + " columns");
    }
    if (p.blend_x > 0) {
        H3_TRY(check_f32_contig(op, "left", ctx, left, 4));
        H3_TRY(same_planes(op, "left", left, out));
        if (left.dim(2) < p.keep_h || left.dim(3) < p.blend_x)
            return invalid_argument("blend_tile: left is " + desc(left) + ", it needs >= " + num(p.keep_h) +
                                    " rows and >= " + num(p.blend_x) + " columns");
    }
    if (cur.data() == out.data()) return invalid_argument("blend_tile: cur and out must not alias");
    H3_OPS_DISPATCH(blend_tile, ctx, p, cur, up, left, out);
}

Status crossfade_frames(const Context& ctx, const CrossfadeParams& p, const Tensor& src, const Tensor& prev,
                        Tensor& out) {
    const char* op = "crossfade_frames";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "src", ctx, src, 4));
    H3_TRY(check_f32_contig(op, "out", ctx, out, 4));
    H3_TRY(check_writable(op, "out", out));
    if (src.dim(0) != out.dim(0) || src.dim(2) != out.dim(2) || src.dim(3) != out.dim(3))
        return invalid_argument("crossfade_frames: src is " + desc(src) + " but out is " + desc(out) +
                                " (channels and frame size must match)");
    if (p.frames < 0 || p.src_frame < 0 || p.out_frame < 0 || p.fade < 0 || p.prev_frame < 0)
        return invalid_argument("crossfade_frames: frame counts and offsets must be >= 0");
    if (p.src_frame + p.frames > src.dim(1) || p.out_frame + p.frames > out.dim(1))
        return invalid_argument("crossfade_frames: " + num(p.frames) + " frames from " + num(p.src_frame) +
                                " of " + desc(src) + " to " + num(p.out_frame) + " of " + desc(out) +
                                " leave a tensor");
    if (p.fade > 0) {
        H3_TRY(check_f32_contig(op, "prev", ctx, prev, 4));
        if (prev.dim(0) != out.dim(0) || prev.dim(2) != out.dim(2) || prev.dim(3) != out.dim(3) ||
            p.prev_frame + std::min(p.fade, p.frames) > prev.dim(1))
            return invalid_argument(
                "crossfade_frames: prev is " + desc(prev) + ", it needs frames " + num(p.prev_frame) + ".." +
                num(p.prev_frame + std::min(p.fade, p.frames)) + " of the out frame size");
        if (prev.data() == out.data())
            return invalid_argument("crossfade_frames: prev and out must not alias");
    }
    if (src.data() == out.data()) return invalid_argument("crossfade_frames: src and out must not alias");
    H3_OPS_DISPATCH(crossfade_frames, ctx, p, src, prev, out);
}

Status crop_tile(const Context& ctx, const CropTileParams& p, const Tensor& src, Tensor& out) {
    const char* op = "crop_tile";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_f32_contig(op, "src", ctx, src, 4));
    H3_TRY(check_f32_contig(op, "out", ctx, out, 4));
    H3_TRY(check_writable(op, "out", out));
    H3_TRY(same_planes(op, "src", src, out));
    if (p.y0 < 0 || p.x0 < 0) return invalid_argument("crop_tile: the corner must be >= 0");
    if (p.y0 + out.dim(2) > src.dim(2) || p.x0 + out.dim(3) > src.dim(3))
        return invalid_argument("crop_tile: a " + num(out.dim(2)) + "×" + num(out.dim(3)) + " tile at (" +
                                num(p.y0) + ", " + num(p.x0) + ") leaves src " + desc(src));
    if (src.data() == out.data()) return invalid_argument("crop_tile: src and out must not alias");
    H3_OPS_DISPATCH(crop_tile, ctx, p, src, out);
}

} // namespace h3::ops
