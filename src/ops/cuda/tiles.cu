// CUDA blend_tile / crossfade_frames / crop_tile: one thread per output element (4 consecutive columns per
// thread when every row is 16-byte aligned), the blend spelled with round-to-nearest intrinsics so the result
// is the CPU reference's to the bit. Memory-bound copies with a linear ramp.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kBlock = 256;

// a·(1 − w) + b·w, each product and the sum rounded once (the CPU expression, uncontracted).
__device__ __forceinline__ float lerp_rn(float a, float b, float w) {
    return __fadd_rn(__fmul_rn(a, __fsub_rn(1.0f, w)), __fmul_rn(b, w));
}

struct BlendArgs {
    const float* cur;
    const float* up;
    const float* left;
    float* out;
    int64_t planes, th, tw, uh, uw, lh, lw, height, width;
    int64_t out_y, out_x, keep_h, keep_w, ey, ex;
};

__global__ void blend_tile_kernel(const BlendArgs a) {
    const int64_t total = a.planes * a.keep_h * a.keep_w;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t c = i % a.keep_w, pr = i / a.keep_w, r = pr % a.keep_h, plane = pr / a.keep_h;
        float v = a.cur[(plane * a.th + r) * a.tw + c];
        if (r < a.ey) {
            const float wy = __fdiv_rn(static_cast<float>(r), static_cast<float>(a.ey));
            v = lerp_rn(a.up[(plane * a.uh + a.uh - a.ey + r) * a.uw + c], v, wy);
        }
        if (c < a.ex) {
            const float wb = __fdiv_rn(static_cast<float>(c), static_cast<float>(a.ex));
            v = lerp_rn(a.left[(plane * a.lh + r) * a.lw + a.lw - a.ex + c], v, wb);
        }
        a.out[(plane * a.height + a.out_y + r) * a.width + a.out_x + c] = v;
    }
}

// Rows in the kept region past the blend (r >= ey) and columns past ex (c >= ex) are plain copies: the
// common case, 16 bytes at a time.
__global__ void copy_rows_vec4_kernel(const float* __restrict__ src, int64_t src_pitch, int64_t src_plane,
                                      float* __restrict__ dst, int64_t dst_pitch, int64_t dst_plane,
                                      int64_t planes, int64_t rows, int64_t cols4) {
    const int64_t total = planes * rows * cols4;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t c = i % cols4, pr = i / cols4, r = pr % rows, plane = pr / rows;
        const float4 v = reinterpret_cast<const float4*>(src + plane * src_plane + r * src_pitch)[c];
        reinterpret_cast<float4*>(dst + plane * dst_plane + r * dst_pitch)[c] = v;
    }
}

// Plain copy of rows element by element (crop_tile when the rows are not 16-byte aligned).
__global__ void copy_rows_kernel(const float* __restrict__ src, int64_t src_pitch, int64_t src_plane,
                                 float* __restrict__ dst, int64_t dst_pitch, int64_t dst_plane,
                                 int64_t planes, int64_t rows, int64_t cols) {
    const int64_t total = planes * rows * cols;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t c = i % cols, pr = i / cols, r = pr % rows, plane = pr / rows;
        dst[plane * dst_plane + r * dst_pitch + c] = src[plane * src_plane + r * src_pitch + c];
    }
}

struct FadeArgs {
    const float* src;
    const float* prev;
    float* out;
    int64_t ch, hw, frames, fade, fs, fp, fo, src_frame, prev_frame, out_frame;
};

template <int N> __global__ void crossfade_kernel(const FadeArgs a) {
    const int64_t per_frame = a.hw / N, total = a.ch * a.frames * per_frame;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t e = (i % per_frame) * N, ck = i / per_frame, k = ck % a.frames, c = ck / a.frames;
        float v[N];
        load_vec<N>(a.src + (c * a.fs + a.src_frame + k) * a.hw + e, v);
        if (k < a.fade) {
            const float wb = __fdiv_rn(static_cast<float>(k), static_cast<float>(a.fade));
            float pv[N];
            load_vec<N>(a.prev + (c * a.fp + a.prev_frame + k) * a.hw + e, pv);
#pragma unroll
            for (int j = 0; j < N; ++j) v[j] = lerp_rn(pv[j], v[j], wb);
        }
        store_vec<N>(a.out + (c * a.fo + a.out_frame + k) * a.hw + e, v);
    }
}

} // namespace

Status blend_tile(const Context& ctx, const BlendTileParams& p, const Tensor& cur, const Tensor& up,
                  const Tensor& left, Tensor& out) {
    BlendArgs a{};
    a.cur = cur.data_as<const float>();
    a.up = p.blend_y > 0 ? up.data_as<const float>() : nullptr;
    a.left = p.blend_x > 0 ? left.data_as<const float>() : nullptr;
    a.out = out.data_as<float>();
    a.planes = cur.dim(0) * cur.dim(1), a.th = cur.dim(2), a.tw = cur.dim(3);
    a.uh = p.blend_y > 0 ? up.dim(2) : 0, a.uw = p.blend_y > 0 ? up.dim(3) : 0;
    a.lh = p.blend_x > 0 ? left.dim(2) : 0, a.lw = p.blend_x > 0 ? left.dim(3) : 0;
    a.height = out.dim(2), a.width = out.dim(3);
    a.out_y = p.out_y, a.out_x = p.out_x, a.keep_h = p.keep_h, a.keep_w = p.keep_w;
    a.ey = p.blend_y, a.ex = p.blend_x; // the ramps' lengths (the blended rows / columns may be fewer)
    if (a.planes == 0 || a.keep_h == 0 || a.keep_w == 0) return ok_status();
    const cudaStream_t s = stream_of(ctx);
    // The blended border (rows < ey over the full width, columns < ex below them) element-wise; the rest,
    // a plain copy, 16 bytes at a time when the pitches and the offsets allow it.
    const int64_t ex = std::min(a.ex, a.keep_w), ey = std::min(a.ey, a.keep_h); // blended columns / rows
    const float* src0 = a.cur + ey * a.tw + ex;
    float* dst0 = a.out + (a.out_y + ey) * a.width + a.out_x + ex;
    const int64_t rest_cols = a.keep_w - ex, rest_rows = a.keep_h - ey;
    const bool vec = rest_cols % 4 == 0 && a.tw % 4 == 0 && a.width % 4 == 0 &&
                     pointer_alignment(src0) >= 16 && pointer_alignment(dst0) >= 16;
    if (!vec) {
        blend_tile_kernel<<<grid_for(a.planes * a.keep_h * a.keep_w, kBlock), kBlock, 0, s>>>(a);
        return check_launch("blend_tile");
    }
    if (ey > 0) { // the top rows, full kept width
        BlendArgs top = a;
        top.keep_h = ey;
        blend_tile_kernel<<<grid_for(a.planes * ey * a.keep_w, kBlock), kBlock, 0, s>>>(top);
        H3_TRY(check_launch("blend_tile (top)"));
    }
    if (ex > 0 && rest_rows > 0) { // the left columns below them: shift the tile down by ey rows
        BlendArgs side = a;
        side.cur = a.cur + ey * a.tw;
        side.left = a.left + ey * a.lw;
        side.out_y = a.out_y + ey;
        side.keep_h = rest_rows;
        side.keep_w = ex;
        side.ey = 0; // rows >= ey are not blended with the tile above; plane pitches stay the tile's
        blend_tile_kernel<<<grid_for(a.planes * rest_rows * ex, kBlock), kBlock, 0, s>>>(side);
        H3_TRY(check_launch("blend_tile (left)"));
    }
    if (rest_rows > 0 && rest_cols > 0) {
        copy_rows_vec4_kernel<<<grid_for(a.planes * rest_rows * rest_cols / 4, kBlock), kBlock, 0, s>>>(
            src0, a.tw, a.th * a.tw, dst0, a.width, a.height * a.width, a.planes, rest_rows, rest_cols / 4);
        H3_TRY(check_launch("blend_tile (copy)"));
    }
    return ok_status();
}

Status crossfade_frames(const Context& ctx, const CrossfadeParams& p, const Tensor& src, const Tensor& prev,
                        Tensor& out) {
    FadeArgs a{};
    a.src = src.data_as<const float>();
    a.prev = p.fade > 0 ? prev.data_as<const float>() : nullptr;
    a.out = out.data_as<float>();
    a.ch = src.dim(0), a.hw = src.dim(2) * src.dim(3), a.frames = p.frames, a.fade = p.fade;
    a.fs = src.dim(1), a.fp = p.fade > 0 ? prev.dim(1) : 0, a.fo = out.dim(1);
    a.src_frame = p.src_frame, a.prev_frame = p.prev_frame, a.out_frame = p.out_frame;
    if (a.ch == 0 || a.frames == 0 || a.hw == 0) return ok_status();
    const bool vec = a.hw % 8 == 0 && pointer_alignment(a.src) >= 16 && pointer_alignment(a.out) >= 16 &&
                     (!a.prev || pointer_alignment(a.prev) >= 16);
    if (vec)
        crossfade_kernel<8><<<grid_for(a.ch * a.frames * a.hw / 8, kBlock), kBlock, 0, stream_of(ctx)>>>(a);
    else
        crossfade_kernel<1><<<grid_for(a.ch * a.frames * a.hw, kBlock), kBlock, 0, stream_of(ctx)>>>(a);
    return check_launch("crossfade_frames");
}

Status crop_tile(const Context& ctx, const CropTileParams& p, const Tensor& src, Tensor& out) {
    const int64_t planes = out.dim(0) * out.dim(1), th = out.dim(2), tw = out.dim(3);
    const int64_t height = src.dim(2), width = src.dim(3);
    if (planes == 0 || th == 0 || tw == 0) return ok_status();
    const float* src0 = src.data_as<const float>() + p.y0 * width + p.x0;
    float* dst0 = out.data_as<float>();
    const cudaStream_t s = stream_of(ctx);
    if (tw % 4 == 0 && width % 4 == 0 && pointer_alignment(src0) >= 16 && pointer_alignment(dst0) >= 16) {
        copy_rows_vec4_kernel<<<grid_for(planes * th * tw / 4, kBlock), kBlock, 0, s>>>(
            src0, width, height * width, dst0, tw, th * tw, planes, th, tw / 4);
    } else {
        copy_rows_kernel<<<grid_for(planes * th * tw, kBlock), kBlock, 0, s>>>(
            src0, width, height * width, dst0, tw, th * tw, planes, th, tw);
    }
    return check_launch("crop_tile");
}

} // namespace h3::ops::cuda_impl
