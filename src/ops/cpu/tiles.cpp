// CPU references of blend_tile, crossfade_frames and crop_tile: the per-element expressions of ops/tiles.h,
// rows in parallel.
#include "ops/cpu/cpu_ops.h"

#include <cstring>

namespace h3::ops::cpu_impl {

Status blend_tile(const Context&, const BlendTileParams& p, const Tensor& cur, const Tensor& up,
                  const Tensor& left, Tensor& out) {
    const int64_t planes = cur.dim(0) * cur.dim(1), th = cur.dim(2), tw = cur.dim(3);
    const int64_t height = out.dim(2), width = out.dim(3);
    const int64_t ey = p.blend_y, ex = p.blend_x, kh = p.keep_h, kw = p.keep_w;
    const float* cp = cur.data_as<const float>();
    const float* upp = ey > 0 ? up.data_as<const float>() : nullptr;
    const float* lp = ex > 0 ? left.data_as<const float>() : nullptr;
    const int64_t uh = ey > 0 ? up.dim(2) : 0, uw = ey > 0 ? up.dim(3) : 0;
    const int64_t lh = ex > 0 ? left.dim(2) : 0, lw = ex > 0 ? left.dim(3) : 0;
    float* dst = out.data_as<float>();
#pragma omp parallel for schedule(static) if (planes * kh * kw > (1 << 16))
    for (int64_t pr = 0; pr < planes * kh; ++pr) {
        const int64_t plane = pr / kh, r = pr % kh;
        const float* crow = cp + (plane * th + r) * tw;
        const float* urow = r < ey ? upp + (plane * uh + uh - ey + r) * uw : nullptr;
        const float* lrow = ex > 0 ? lp + (plane * lh + r) * lw + lw - ex : nullptr;
        const float wy = r < ey ? static_cast<float>(r) / static_cast<float>(ey) : 1.0f;
        float* orow = dst + (plane * height + p.out_y + r) * width + p.out_x;
        for (int64_t c = 0; c < kw; ++c) {
            float v = crow[c];
            if (urow) v = urow[c] * (1.0f - wy) + v * wy;
            if (c < ex) {
                const float wb = static_cast<float>(c) / static_cast<float>(ex);
                v = lrow[c] * (1.0f - wb) + v * wb;
            }
            orow[c] = v;
        }
    }
    return ok_status();
}

Status crossfade_frames(const Context&, const CrossfadeParams& p, const Tensor& src, const Tensor& prev,
                        Tensor& out) {
    const int64_t ch = src.dim(0), hw = src.dim(2) * src.dim(3), n = p.frames, e = p.fade;
    const int64_t fs = src.dim(1), fo = out.dim(1), fp = e > 0 ? prev.dim(1) : 0;
    const float* sp = src.data_as<const float>();
    const float* pp = e > 0 ? prev.data_as<const float>() : nullptr;
    float* op = out.data_as<float>();
#pragma omp parallel for schedule(static) if (ch * n * hw > (1 << 16))
    for (int64_t ck = 0; ck < ch * n; ++ck) {
        const int64_t c = ck / n, k = ck % n;
        const float* s = sp + (c * fs + p.src_frame + k) * hw;
        float* o = op + (c * fo + p.out_frame + k) * hw;
        if (k >= e) {
            std::memcpy(o, s, static_cast<size_t>(hw) * sizeof(float));
            continue;
        }
        const float wb = static_cast<float>(k) / static_cast<float>(e);
        const float* a = pp + (c * fp + p.prev_frame + k) * hw;
        for (int64_t i = 0; i < hw; ++i) o[i] = a[i] * (1.0f - wb) + s[i] * wb;
    }
    return ok_status();
}

Status crop_tile(const Context&, const CropTileParams& p, const Tensor& src, Tensor& out) {
    const int64_t planes = out.dim(0) * out.dim(1), th = out.dim(2), tw = out.dim(3);
    const int64_t height = src.dim(2), width = src.dim(3);
    const float* sp = src.data_as<const float>();
    float* dst = out.data_as<float>();
#pragma omp parallel for schedule(static) if (planes * th * tw > (1 << 16))
    for (int64_t pr = 0; pr < planes * th; ++pr) {
        const int64_t plane = pr / th, r = pr % th;
        std::memcpy(dst + pr * tw, sp + (plane * height + p.y0 + r) * width + p.x0,
                    static_cast<size_t>(tw) * sizeof(float));
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
