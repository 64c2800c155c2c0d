// The ViT decoder forward (ops only) and the clip/tile stitching of spec §9.3 (ops too: on CUDA the tiles
// never leave the device; one download of the finished sample, or of the RGB24 frames made from it there).
#include "core/buffer_pool.h"
#include "core/check.h"
#include "core/chunk_download.h"
#include "core/cuda_api.h"
#include "core/staging.h"
#include "core/storage.h"
#include "model/video_vae/vae_profile.h"
#include "model/video_vae/video_vae.h"
#include "ops/cancel.h"
#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace h3::model {

namespace {

Result<Tensor> to_host(const ops::Context& ctx, const Tensor& t) {
    if (t.device().is_cpu()) return t;
    H3_TRY(cuda::stream_synchronize(ctx.stream()));
    return t.to(Device::cpu());
}

// Stream-ordered (no device-wide synchronize).
Result<Tensor> upload(const ops::Context& ctx, const Tensor& host) {
    if (ctx.device.is_cpu()) return host;
    return host.to(ctx.device, ctx.stream());
}

// cos/sin [S, rot] for the tokens (t, y, x) of a t×h×w grid followed by `extra` tokens at position 0.
void rope_tables(const VideoVaeConfig& c, int64_t t, int64_t h, int64_t w, int64_t extra, Tensor& cos_t,
                 Tensor& sin_t) {
    const int rot = c.rotary_dim(), nf = rot / 6;
    const int64_t n = t * h * w, s = n + extra;
    cos_t = Tensor::host(Shape{s, rot}, DType::kF32);
    sin_t = Tensor::host(Shape{s, rot}, DType::kF32);
    std::vector<float> inv(static_cast<size_t>(nf));
    for (int j = 0; j < nf; ++j)
        inv[static_cast<size_t>(j)] =
            static_cast<float>(1.0 / std::pow(c.rope_theta, static_cast<float>(j) * (6.0f / rot)));
    const int64_t size[3] = {t, h, w};
    float* cp = cos_t.data_as<float>();
    float* sp = sin_t.data_as<float>();
    for (int64_t i = 0; i < s; ++i) {
        float pos[3] = {0.0f, 0.0f, 0.0f};
        if (i < n) {
            const int64_t idx[3] = {i / (h * w), (i / w) % h, i % w};
            for (int a = 0; a < 3; ++a)
                pos[a] = 2.0f * ((static_cast<float>(idx[a]) + 0.5f) / static_cast<float>(size[a])) - 1.0f;
        }
        for (int a = 0; a < 3; ++a)
            for (int j = 0; j < nf; ++j) {
                const float ang = static_cast<float>(2.0 * M_PI) * pos[a] * inv[static_cast<size_t>(j)];
                const int64_t col = a * nf + j;
                cp[i * rot + col] = cp[i * rot + col + rot / 2] = std::cos(ang);
                sp[i * rot + col] = sp[i * rot + col + rot / 2] = std::sin(ang);
            }
    }
}

void mark(const ops::Context& ctx, const char* phase) {
    vae_profile::mark(ctx, phase);
}

} // namespace

// Tables that depend only on the tile shape and the tiles per call: built once, reused by every call.
struct VideoVaeTables {
    struct Entry {
        int64_t t = 0, h = 0, w = 0, nb = 0;
        Tensor cos, sin; // [nb·S, rot] on the device, each tile's rows the same
        Tensor rows;     // [nb·S] i32 zeros: every row uses layer-scale row 0
        Tensor unpatch;  // [nb·C·F·H·W/p] i32 gather index
        Tensor zero;     // [1, D] f32 zeros (each tile's trailing token)
    };
    // The activations of one decoder call, reused while the call shape holds (one set: a new shape releases
    // the old one first).
    struct Work {
        int64_t rows_all = 0, tokens = 0;
        Tensor tok, pq, x, y, q, k, v, o, f1, f2, yf, px;
        // the fp8 blocks' rounded GEMM inputs: the norms' (q/k/v's shared one, then ff in's) and ff out's
        ops::Fp8Activation y8, f2_8;
    };
    std::mutex mutex;
    std::vector<Entry> entries; // most recent last; a few shapes at most
    Work work;
    // Each call's tokens go up through a page-locked buffer, stream-ordered (a pageable copy may wait for
    // the stream, and so keep the host from queueing the next call while the device works).
    std::unique_ptr<StagingBuffer> upload = std::make_unique<StagingBuffer>();
};

namespace {

Result<VideoVaeTables::Entry> shape_tables(const ops::Context& ctx, const VideoVae& vae, int64_t t, int64_t h,
                                           int64_t wd, int64_t nb) {
    if (!vae.tables) vae.tables = std::make_shared<VideoVaeTables>();
    VideoVaeTables& tabs = *vae.tables;
    std::lock_guard<std::mutex> lock(tabs.mutex);
    for (const auto& e : tabs.entries)
        if (e.t == t && e.h == h && e.w == wd && e.nb == nb && e.cos.device() == ctx.device) return e;
    const VideoVaeConfig& c = vae.config;
    const int64_t n = t * h * wd, extra = c.num_register_tokens + 1, s = n + extra, rows_all = nb * s;
    VideoVaeTables::Entry e;
    e.t = t, e.h = h, e.w = wd, e.nb = nb;
    Tensor cos_1, sin_1;
    rope_tables(c, t, h, wd, extra, cos_1, sin_1);
    const int rot = std::max(c.rotary_dim(), 1);
    Tensor cos_h = Tensor::host(Shape{rows_all, rot}, DType::kF32);
    Tensor sin_h = Tensor::host(Shape{rows_all, rot}, DType::kF32);
    if (c.rotary_dim() > 0)
        for (int64_t b = 0; b < nb; ++b) {
            std::memcpy(cos_h.data_as<float>() + b * s * rot, cos_1.data_as<const float>(),
                        static_cast<size_t>(s * rot) * sizeof(float));
            std::memcpy(sin_h.data_as<float>() + b * s * rot, sin_1.data_as<const float>(),
                        static_cast<size_t>(s * rot) * sizeof(float));
        }
    H3_ASSIGN_OR_RETURN(e.cos, upload(ctx, cos_h));
    H3_ASSIGN_OR_RETURN(e.sin, upload(ctx, sin_h));
    Tensor rows_h = Tensor::host(Shape{rows_all}, DType::kI32); // zeroed
    H3_ASSIGN_OR_RETURN(e.rows, upload(ctx, rows_h));
    H3_ASSIGN_OR_RETURN(e.zero, upload(ctx, Tensor::host(Shape{1, c.dim()}, DType::kF32)));
    {
        // unpatchify as a row gather of p-wide rows: out row (b, ch, f, yy, xi) <- px row (b, token, ch, a,
        // py)
        const int64_t p = c.patch, pt = c.patch_t, oc = c.out_channels, of = t * pt, oh = h * p;
        Tensor idx = Tensor::host(Shape{nb * oc * of * oh * wd}, DType::kI32);
        int32_t* ip = idx.data_as<int32_t>();
        for (int64_t b = 0; b < nb; ++b)
            for (int64_t ch = 0; ch < oc; ++ch)
                for (int64_t f = 0; f < of; ++f)
                    for (int64_t yy = 0; yy < oh; ++yy)
                        for (int64_t xi = 0; xi < wd; ++xi) {
                            const int64_t ti = f / pt, a = f % pt, yi = yy / p, py = yy % p;
                            const int64_t tok = b * n + (ti * h + yi) * wd + xi;
                            *ip++ = static_cast<int32_t>(((tok * oc + ch) * pt + a) * p + py);
                        }
        H3_ASSIGN_OR_RETURN(e.unpatch, upload(ctx, idx));
    }
    if (tabs.entries.size() >= 4) tabs.entries.erase(tabs.entries.begin());
    tabs.entries.push_back(e);
    return e;
}

// The call's activation buffers (allocated when the call shape changes).
Result<VideoVaeTables::Work*> call_work(const ops::Context& ctx, const VideoVae& vae, int64_t rows_all,
                                        int64_t tokens) {
    VideoVaeTables& tabs = *vae.tables;
    VideoVaeTables::Work& w = tabs.work;
    if (w.x.defined() && w.rows_all == rows_all && w.tokens == tokens && w.x.device() == ctx.device)
        return &w;
    w = VideoVaeTables::Work{}; // release before allocating the new set
    const VideoVaeConfig& c = vae.config;
    const int64_t d = c.dim();
    auto f32 = [&](const Shape& sh) { return Tensor::empty(sh, DType::kF32, ctx.device); };
    auto cdt = [&](const Shape& sh) { return Tensor::empty(sh, vae.compute, ctx.device); };
    H3_ASSIGN_OR_RETURN(w.tok, f32(Shape{tokens, c.latent_channels}));
    H3_ASSIGN_OR_RETURN(w.pq, f32(Shape{tokens, c.latent_channels}));
    H3_ASSIGN_OR_RETURN(w.x, f32(Shape{rows_all, d}));
    H3_ASSIGN_OR_RETURN(w.y, cdt(Shape{rows_all, d}));
    H3_ASSIGN_OR_RETURN(w.q, cdt(Shape{rows_all, d}));
    H3_ASSIGN_OR_RETURN(w.k, cdt(Shape{rows_all, d}));
    H3_ASSIGN_OR_RETURN(w.v, cdt(Shape{rows_all, d}));
    H3_ASSIGN_OR_RETURN(w.o, cdt(Shape{rows_all, d}));
    H3_ASSIGN_OR_RETURN(w.f1, cdt(Shape{rows_all, 2LL * c.ffn_dim()}));
    if (vae.weights.fp8.empty()) { // the fp8 blocks' SwiGLU writes e4m3 rows (f2_8) instead
        H3_ASSIGN_OR_RETURN(w.f2, cdt(Shape{rows_all, c.ffn_dim()}));
    }
    H3_ASSIGN_OR_RETURN(w.yf, f32(Shape{rows_all, d}));
    H3_ASSIGN_OR_RETURN(w.px, f32(Shape{tokens, c.patch_dim()}));
    if (!vae.weights.fp8.empty()) {
        auto e4m3 = [&](const Shape& sh) { return Tensor::empty(sh, DType::kF8E4M3, ctx.device); };
        H3_ASSIGN_OR_RETURN(w.y8.data, e4m3(Shape{rows_all, d}));
        H3_ASSIGN_OR_RETURN(w.y8.scale, f32(Shape{rows_all}));
        H3_ASSIGN_OR_RETURN(w.f2_8.data, e4m3(Shape{rows_all, c.ffn_dim()}));
        H3_ASSIGN_OR_RETURN(w.f2_8.scale, f32(Shape{rows_all}));
    }
    w.rows_all = rows_all, w.tokens = tokens;
    return &w;
}

// One decoder call over equally-shaped tile-clips: the pixels of all of them, [nb, C, F, H, W] on ctx's
// device (unpatchified by one row gather; into a buffer of `pool` when given, so that a decode's loop over
// clips frees nothing — cudaFree waits for the whole device).
Result<Tensor> decode_tiles_on_device(const ops::Context& ctx, const VideoVae& vae,
                                      const std::vector<Tensor>& zs, BufferPool* pool = nullptr) {
    const VideoVaeConfig& c = vae.config;
    const VideoVaeWeights& w = vae.weights;
    const Tensor& z0 = zs[0];
    const int64_t lc = c.latent_channels, t = z0.dim(1), h = z0.dim(2), wd = z0.dim(3);
    for (const Tensor& z : zs)
        if (!(z.shape() == z0.shape()))
            return invalid_argument("decode_tile_clips: tiles of different shapes " + z.describe() + " vs " +
                                    z0.describe());
    const int64_t nb = static_cast<int64_t>(zs.size());
    const int64_t n = t * h * wd, extra = c.num_register_tokens + 1, s = n + extra;
    const int64_t rows_all = nb * s;
    mark(ctx, "host_other");
    H3_ASSIGN_OR_RETURN(const VideoVaeTables::Entry tabs, shape_tables(ctx, vae, t, h, wd, nb));
    H3_ASSIGN_OR_RETURN(VideoVaeTables::Work * work, call_work(ctx, vae, rows_all, nb * n));
    // tokens [B·N, C] in (tile, t, y, x) order
    Tensor tok = Tensor::host(Shape{nb * n, lc}, DType::kF32);
    for (int64_t b = 0; b < nb; ++b) {
        const float* zp = zs[static_cast<size_t>(b)].data_as<const float>();
        float* tp = tok.data_as<float>() + b * n * lc;
        for (int64_t i = 0; i < n; ++i)
            for (int64_t ch = 0; ch < lc; ++ch) tp[i * lc + ch] = zp[ch * n + i];
    }
    Tensor& tok_d = work->tok;
    H3_TRY(vae.tables->upload->upload(tok, tok_d, ctx.stream()));
    Tensor& pq = work->pq;
    H3_TRY(ops::gemm(ctx, {}, tok_d, w.pq_w, w.pq_b, pq));
    // x [B·S, D]: per tile its N tokens, the registers, one zero token
    Tensor& x = work->x;
    const Tensor& zero_d = tabs.zero;
    for (int64_t b = 0; b < nb; ++b) {
        Tensor xin = x.slice(0, b * s, b * s + n);
        Tensor pqb = pq.slice(0, b * n, (b + 1) * n);
        H3_TRY(ops::gemm(ctx, {}, pqb, w.proj_in_w, w.proj_in_b, xin));
        Tensor xr = x.slice(0, b * s + n, b * s + n + c.num_register_tokens);
        H3_TRY(xr.copy_from(w.registers, ctx.stream()));
        Tensor xz = x.slice(0, b * s + s - 1, b * s + s);
        H3_TRY(xz.copy_from(zero_d, ctx.stream()));
    }

    const Tensor &cos_t = tabs.cos, &sin_t = tabs.sin, &rows = tabs.rows;
    mark(ctx, "proj_in");

    Tensor &y = work->y, &q = work->q, &k = work->k, &v = work->v, &o = work->o, &f1 = work->f1,
           &f2 = work->f2;
    const ops::RmsNormParams np{.eps = static_cast<float>(c.norm_eps)};
    const ops::RopeParams rp{.rotary_dim = c.rotary_dim()};
    const int64_t hh = c.num_heads, hd = c.head_dim;
    // VideoVaePrecision::kFp8: the block GEMMs in e4m3, cuBLASLt's fast fp8 accumulation as the DiT's fp8
    // blocks use. Their inputs come rounded from the op that makes them (ops/fp8_fused.h): the norms write
    // q/k/v's input (once for the three) and ff in's as e4m3 rows (y8; the bf16 y they would store is read by
    // nothing else), the SwiGLU ff out's (f2_8); only the attention output goes to gemm_fp8 in bf16.
    const bool fp8 = !w.fp8.empty();
    const ops::Fp8GemmParams fp{.fast_accum = true};
    // Each residual add is fused with the norm that reads its result: block i's second one with block i+1's
    // norm1 (the first block's norm1 stands alone, the last block's residual precedes norm_out).
    if (!w.blocks.empty()) {
        if (fp8)
            H3_TRY(ops::rms_norm_fp8(ctx, np, x, w.blocks.front().norm1, work->y8));
        else
            H3_TRY(ops::rms_norm(ctx, np, x, w.blocks.front().norm1, y));
    }
    mark(ctx, "norms_residual");
    for (size_t bi = 0; bi < w.blocks.size(); ++bi) {
        const VideoVaeBlock& b = w.blocks[bi];
        if (fp8) {
            const VideoVaeFp8Block& f = w.fp8[bi];
            H3_TRY(ops::gemm_fp8(ctx, fp, work->y8, f.q, b.q_b, q));
            H3_TRY(ops::gemm_fp8(ctx, fp, work->y8, f.k, b.k_b, k));
            H3_TRY(ops::gemm_fp8(ctx, fp, work->y8, f.v, b.v_b, v));
        } else {
            H3_TRY(ops::gemm(ctx, {}, y, b.q_w, b.q_b, q));
            H3_TRY(ops::gemm(ctx, {}, y, b.k_w, b.k_b, k));
            H3_TRY(ops::gemm(ctx, {}, y, b.v_w, b.v_b, v));
        }
        mark(ctx, "gemm_qkv");
        Tensor q3 = q.view({rows_all, hh, hd}), k3 = k.view({rows_all, hh, hd});
        if (c.rotary_dim() > 0) {
            H3_TRY(ops::head_norm_rope(ctx, np, rp, q3, Tensor(), cos_t, sin_t));
            H3_TRY(ops::head_norm_rope(ctx, np, rp, k3, Tensor(), cos_t, sin_t));
        } else {
            H3_TRY(ops::head_norm_rope(ctx, np, rp, q3, Tensor(), Tensor(), Tensor()));
            H3_TRY(ops::head_norm_rope(ctx, np, rp, k3, Tensor(), Tensor(), Tensor()));
        }
        mark(ctx, "head_norm_rope");
        { // attention within each tile: the call's tiles as one batch
            Tensor o3 = o.view({rows_all, hh, hd});
            H3_TRY(ops::attention(ctx, {.batch = nb}, q3, k3, v.view({rows_all, hh, hd}), o3));
        }
        mark(ctx, "attention");
        if (fp8) {
            H3_TRY(ops::gemm_fp8(ctx, fp, o, w.fp8[bi].o, b.o_b, y));
        } else {
            H3_TRY(ops::gemm(ctx, {}, o, b.o_w, b.o_b, y));
        }
        mark(ctx, "gemm_out");
        if (fp8)
            H3_TRY(ops::gated_residual_rms_norm_fp8(ctx, {}, np, x, b.scale1, y, rows, b.norm2, work->y8));
        else
            H3_TRY(ops::gated_residual_rms_norm(ctx, {}, np, x, b.scale1, y, rows, b.norm2, y));
        mark(ctx, "norms_residual");
        if (fp8) {
            H3_TRY(ops::gemm_fp8(ctx, fp, work->y8, w.fp8[bi].ff1, b.ff1_b, f1));
            mark(ctx, "gemm_ff1");
            H3_TRY(ops::swiglu_fp8(ctx, f1, work->f2_8));
            mark(ctx, "swiglu");
            H3_TRY(ops::gemm_fp8(ctx, fp, work->f2_8, w.fp8[bi].ff2, b.ff2_b, y));
        } else {
            H3_TRY(ops::gemm(ctx, {}, y, b.ff1_w, b.ff1_b, f1));
            mark(ctx, "gemm_ff1");
            H3_TRY(ops::swiglu(ctx, f1, f2));
            mark(ctx, "swiglu");
            H3_TRY(ops::gemm(ctx, {}, f2, b.ff2_w, b.ff2_b, y));
        }
        mark(ctx, "gemm_ff2");
        if (bi + 1 < w.blocks.size()) {
            const Tensor& next_norm1 = w.blocks[bi + 1].norm1;
            if (fp8)
                H3_TRY(ops::gated_residual_rms_norm_fp8(ctx, {}, np, x, b.scale2, y, rows, next_norm1,
                                                        work->y8));
            else
                H3_TRY(ops::gated_residual_rms_norm(ctx, {}, np, x, b.scale2, y, rows, next_norm1, y));
        } else {
            H3_TRY(ops::gated_residual(ctx, {}, x, b.scale2, y, rows));
        }
        mark(ctx, "norms_residual");
    }
    // norm_out + proj_out in fp32
    Tensor& yf = work->yf;
    H3_TRY(ops::layer_norm(ctx, {.eps = static_cast<float>(c.norm_eps)}, x, w.norm_out_w, w.norm_out_b, yf));
    Tensor& px = work->px;
    for (int64_t bi = 0; bi < nb; ++bi) {
        Tensor yn = yf.slice(0, bi * s, bi * s + n);
        Tensor pxb = px.slice(0, bi * n, (bi + 1) * n);
        H3_TRY(ops::gemm(ctx, {}, yn, w.proj_out_w, w.proj_out_b, pxb));
    }
    mark(ctx, "proj_out");
    const int64_t p = c.patch, pt = c.patch_t, oc = c.out_channels;
    const int64_t of = t * pt, oh = h * p, ow = wd * p;
    // unpatchify: one row gather of p-wide rows into a fresh tensor (it outlives the call's buffers)
    const Shape un_shape{nb * oc * of * oh * wd, p};
    H3_ASSIGN_OR_RETURN(Tensor un, pool ? pool->take(un_shape, DType::kF32)
                                        : Tensor::empty(un_shape, DType::kF32, ctx.device));
    H3_TRY(ops::gather_rows(ctx, px.view({nb * n * oc * pt * p, p}), tabs.unpatch, un));
    mark(ctx, "unpatch");
    return un.view({nb, oc, of, oh, ow});
}

} // namespace

Result<std::vector<Tensor>> decode_tile_clips(const ops::Context& ctx, const VideoVae& vae,
                                              const std::vector<Tensor>& zs) {
    if (zs.empty()) return std::vector<Tensor>{};
    H3_ASSIGN_OR_RETURN(Tensor all, decode_tiles_on_device(ctx, vae, zs));
    H3_ASSIGN_OR_RETURN(Tensor host, to_host(ctx, all));
    std::vector<Tensor> outs;
    for (int64_t bi = 0; bi < all.dim(0); ++bi)
        outs.push_back(host.slice(0, bi, bi + 1).view({all.dim(1), all.dim(2), all.dim(3), all.dim(4)}));
    return outs;
}

int video_tile_batch(const VideoDecodeOptions& options, Device device, int tiles) {
    if (options.tile_batch > 0) return options.tile_batch;
    if (device.is_cpu() || tiles <= 1) return 1;
    constexpr int kMaxPerCall = 16; // ~2 GiB of activations per call at the official tile size
    const int calls = (tiles + kMaxPerCall - 1) / kMaxPerCall;
    return (tiles + calls - 1) / calls;
}

Result<Tensor> decode_tile_clip(const ops::Context& ctx, const VideoVae& vae, const Tensor& z) {
    H3_ASSIGN_OR_RETURN(auto outs, decode_tile_clips(ctx, vae, {z}));
    return outs[0];
}

namespace {

// A device group's split of one clip's tiles (row-major index k): rank q decodes [begin[q], begin[q+1]).
struct TileShares {
    int rank = 0;
    std::vector<size_t> begin; // size() + 1 entries; {0, n} without a group
    bool mine(size_t k) const { return k >= begin[static_cast<size_t>(rank)] && k < begin[rank + 1u]; }
};
TileShares tile_shares(const ops::Communicator* group, size_t tiles) {
    TileShares s;
    const size_t n = group ? static_cast<size_t>(group->size()) : 1;
    s.rank = group ? group->rank() : 0;
    for (size_t q = 0; q <= n; ++q) s.begin.push_back(q * tiles / n);
    return s;
}

// Every rank's decoded tiles to every rank (one all_gather of equal, padded shares; tile (i, j) is
// [oc, frames, len_i·p, len_j·p]), then `tiles` holds them all as views into the gathered buffer on actx's
// device. The buffers live where the communicator moves memory (NCCL: the device, else the host).
Status gather_tiles(const ops::Context& ctx, const ops::Context& actx, ops::Communicator& comm,
                    const TileShares& shares, const TileLayout& ty, const TileLayout& tx, int64_t oc,
                    int64_t frames, std::vector<std::vector<Tensor>>& tiles) {
    const size_t nx = tx.starts.size();
    const auto tile_shape = [&](size_t k) {
        return Shape{oc, frames, static_cast<int64_t>(ty.lengths[k / nx]),
                     static_cast<int64_t>(tx.lengths[k % nx])};
    };
    const int n = comm.size();
    int64_t share_max = 0;
    for (int q = 0; q < n; ++q) {
        int64_t e = 0;
        for (size_t k = shares.begin[static_cast<size_t>(q)]; k < shares.begin[q + 1u]; ++k)
            e += tile_shape(k).numel();
        share_max = std::max(share_max, e);
    }
    const Device where = std::string(comm.backend()) == "nccl" ? ctx.device : Device::cpu();
    const ops::Context cctx = where.is_cpu() ? ops::Context::cpu() : ctx;
    H3_ASSIGN_OR_RETURN(Tensor send,
                        Tensor::empty(Shape{std::max<int64_t>(share_max, 1)}, DType::kF32, where));
    int64_t off = 0;
    for (size_t k = shares.begin[static_cast<size_t>(shares.rank)]; k < shares.begin[shares.rank + 1u]; ++k) {
        const Shape sh = tile_shape(k);
        const Tensor& t = tiles[k / nx][k % nx];
        if (!(t.shape() == sh))
            return internal_error("decode_video: tile " + std::to_string(k) + " decoded as " + t.describe() +
                                  ", expected " + sh.to_string());
        Tensor dst = send.slice(0, off, off + sh.numel()).view(sh);
        H3_TRY(dst.copy_from(t, ctx.stream()));
        off += sh.numel();
    }
    H3_ASSIGN_OR_RETURN(Tensor recv, Tensor::empty(Shape{send.numel() * n}, DType::kF32, where));
    H3_TRY(comm.all_gather(cctx, send, recv).with_context("decode_video: gathering the ranks' tiles"));
    if (recv.device() != actx.device) {
        H3_ASSIGN_OR_RETURN(recv, recv.to(actx.device, actx.stream()));
    }
    for (int q = 0; q < n; ++q) {
        off = q * send.numel();
        for (size_t k = shares.begin[static_cast<size_t>(q)]; k < shares.begin[q + 1u]; ++k) {
            const Shape sh = tile_shape(k);
            tiles[k / nx][k % nx] = recv.slice(0, off, off + sh.numel()).view(sh);
            off += sh.numel();
        }
    }
    return ok_status();
}

// One clip [C, t, h, w] (de-normalized, host) -> pixels [3, t·pt, H, W] on ctx's device, tiled and stitched
// there (the device buffers from `pool` when given).
Result<Tensor> decode_clip(const ops::Context& ctx, const VideoVae& vae, const Tensor& z,
                           const VideoDecodeOptions& opt, BufferPool* pool) {
    const ops::CancelScope cancel_scope(opt.cancel); // the ops read it between their blocks too
    const VideoVaeConfig& c = vae.config;
    const int p = c.patch;
    const int64_t lc = z.dim(0), t = z.dim(1), lh = z.dim(2), lw = z.dim(3);
    const int height = static_cast<int>(lh * p), width = static_cast<int>(lw * p);
    if (opt.cancel && opt.cancel->load()) return cancelled("video decode cancelled");
    if (!opt.tiling) {
        if (opt.group && opt.group->rank() != 0) return Tensor(); // one tile: rank 0 decodes it
        H3_ASSIGN_OR_RETURN(Tensor all, decode_tiles_on_device(ctx, vae, {z}, pool));
        if (opt.assemble_on_host) {
            H3_ASSIGN_OR_RETURN(all, to_host(ctx, all));
        }
        return all.view({all.dim(1), all.dim(2), all.dim(3), all.dim(4)});
    }
    const TileLayout ty = split_tiles(height, opt.tile, opt.min_overlap, p);
    const TileLayout tx = split_tiles(width, opt.tile, opt.min_overlap, p);
    const size_t ny = ty.starts.size(), nx = tx.starts.size();
    std::vector<std::vector<Tensor>> tiles(ny, std::vector<Tensor>(nx));
    const size_t max_batch =
        static_cast<size_t>(video_tile_batch(opt, ctx.device, static_cast<int>(ny * nx)));
    std::vector<Tensor> batch;
    std::vector<std::pair<size_t, size_t>> batch_at;
    const ops::Context actx = opt.assemble_on_host ? ops::Context::cpu() : ctx; // where tiles are stitched
    auto flush = [&]() -> Status {
        if (batch.empty()) return ok_status();
        if (opt.cancel && opt.cancel->load()) return cancelled("video decode cancelled");
        H3_ASSIGN_OR_RETURN(Tensor all, decode_tiles_on_device(ctx, vae, batch, pool));
        if (opt.assemble_on_host) {
            H3_ASSIGN_OR_RETURN(all, to_host(ctx, all));
        }
        for (size_t m = 0; m < batch.size(); ++m)
            tiles[batch_at[m].first][batch_at[m].second] =
                all.slice(0, static_cast<int64_t>(m), static_cast<int64_t>(m) + 1)
                    .view({all.dim(1), all.dim(2), all.dim(3), all.dim(4)});
        batch.clear();
        batch_at.clear();
        return ok_status();
    };
    const TileShares shares = tile_shares(opt.group, ny * nx);
    for (size_t i = 0; i < ny; ++i)
        for (size_t j = 0; j < nx; ++j) {
            if (!shares.mine(i * nx + j)) continue; // another rank decodes it
            const int64_t y0 = ty.starts[i] / p, ylen = ty.lengths[i] / p;
            const int64_t x0 = tx.starts[j] / p, xlen = tx.lengths[j] / p;
            Tensor sub = Tensor::host(Shape{lc, t, ylen, xlen}, DType::kF32);
            for (int64_t ch = 0; ch < lc; ++ch)
                for (int64_t f = 0; f < t; ++f)
                    for (int64_t yy = 0; yy < ylen; ++yy)
                        std::memcpy(sub.data_as<float>() + ((ch * t + f) * ylen + yy) * xlen,
                                    z.data_as<const float>() + ((ch * t + f) * lh + y0 + yy) * lw + x0,
                                    static_cast<size_t>(xlen) * sizeof(float));
            if (!batch.empty() && (batch.size() >= max_batch || !(batch[0].shape() == sub.shape())))
                H3_TRY(flush());
            batch.push_back(std::move(sub));
            batch_at.push_back({i, j});
        }
    H3_TRY(flush());
    mark(ctx, "tiles_decode");
    if (opt.group) {
        const int64_t frames = t * c.patch_t;
        H3_TRY(gather_tiles(ctx, actx, *opt.group, shares, ty, tx, c.out_channels, frames, tiles));
        if (opt.group->rank() != 0) return Tensor(); // rank 0 stitches
    }
    H3_ASSIGN_OR_RETURN(Tensor out, stitch_tiles(actx, tiles, ty.overlaps, tx.overlaps, pool));
    mark(ctx, "stitch");
    return out;
}

// Where each decoded clip's frames go (spec §9.3): the chunk [a0, a1) follows the previous chunks, its first
// frames cross-faded with the previous clip's overlap part [b0, b1); the last clip's overlap part is
// appended; `trim_frames` come off the end.
struct ClipFrames {
    int64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
};
ClipFrames clip_frames(const ClipPlan& plan, int64_t clip_frames, bool has_overlap) {
    ClipFrames f;
    f.a0 = std::min<int64_t>(plan.frame_pre_padding, clip_frames);
    f.a1 = std::max(f.a0, std::min<int64_t>(plan.chunk_frames, clip_frames));
    if (has_overlap) {
        f.b0 = std::min<int64_t>(plan.chunk_frames + plan.frame_pre_padding, clip_frames);
        f.b1 = std::max(f.b0, std::min<int64_t>(2LL * plan.chunk_frames, clip_frames));
    }
    return f;
}

// The decode up to the assembled sample [3, F, H, W] f32, left where it was assembled: on ctx's device, or
// on the host with `assemble_on_host` (or a CPU context). A device group's ranks > 0 get an undefined
// tensor (rank 0 assembles). The shared body of decode_video_sample and decode_video_frames.
// A tensor every element of which the caller writes: on the host not zeroed first (zeroing the 1.5 GB
// sample at 1344x768x124 took seconds on a loaded CPU, out of reach of the cancel flag; untouched pages are
// zeroed by the kernel as the clips land, between the flag's reads).
Result<Tensor> empty_overwritten(const Shape& shape, DType dtype, Device device) {
    if (!device.is_cpu()) return Tensor::empty(shape, dtype, device);
    H3_ASSIGN_OR_RETURN(auto storage,
                        allocate_host_uninitialized(static_cast<size_t>(shape.numel()) * dtype_size(dtype)));
    return Tensor::from_storage(std::move(storage), 0, shape, dtype);
}

// `on_final(out, a, b)` (optional): frames [a, b) of `out` are final (called in order as the clips land).
using FinalFrames = std::function<Status(const Tensor& out, int64_t begin, int64_t end)>;
Result<Tensor> assemble_video_sample(const ops::Context& ctx, const VideoVae& vae, const Tensor& latents,
                                     const VideoDecodeOptions& opt, const FinalFrames& on_final = {}) {
    const VideoVaeConfig& c = vae.config;
    if (latents.rank() != 5 || latents.dim(0) != 1 || latents.dim(1) != c.latent_channels)
        return invalid_argument("decode_video: latents must be [1, " + std::to_string(c.latent_channels) +
                                ", T, h, w], got " + latents.describe());
    if (ctx.device != vae.device)
        return invalid_argument("decode_video: the weights live on another device than the context");
    if (opt.tiling && (opt.tile % c.patch || opt.min_overlap % c.patch || opt.min_overlap >= opt.tile))
        return invalid_argument("decode_video: tile and overlap must be multiples of the patch size " +
                                std::to_string(c.patch) + " with overlap < tile");
    mark(ctx, nullptr);
    H3_ASSIGN_OR_RETURN(Tensor lat, to_host(ctx, latents));
    H3_ASSIGN_OR_RETURN(lat, lat.contiguous());
    H3_ASSIGN_OR_RETURN(lat, lat.to_dtype(DType::kF32));
    const int64_t lc = c.latent_channels, tn = lat.dim(2), lh = lat.dim(3), lw = lat.dim(4), hw = lh * lw;
    const ClipPlan plan = plan_clips(static_cast<int>(tn), c.clip_length, c.patch_t, c.token_drop);
    if (plan.num_chunks < 1)
        return invalid_argument("decode_video: " + std::to_string(tn) + " latent frames are too few (need " +
                                std::to_string(plan.clip_latents) + " or more)");
    // de-normalize and pad with repeats of the last latent frame
    const int64_t tp = tn + plan.pad_tokens;
    Tensor z = Tensor::host(Shape{lc, tp, lh, lw}, DType::kF32);
    for (int64_t ch = 0; ch < lc; ++ch)
        for (int64_t f = 0; f < tp; ++f) {
            const float* s = lat.data_as<const float>() + (ch * tn + std::min(f, tn - 1)) * hw;
            float* d = z.data_as<float>() + (ch * tp + f) * hw;
            for (int64_t i = 0; i < hw; ++i)
                d[i] =
                    s[i] * c.latents_std[static_cast<size_t>(ch)] + c.latents_mean[static_cast<size_t>(ch)];
        }
    // The output's frame count from the plan: every clip's chunk, then the last clip's overlap part, less the
    // trimmed padding.
    const bool overlaps = c.token_drop > 0;
    int64_t total = 0, last_overlap = 0;
    for (int start : plan.starts) {
        const int64_t len = std::min<int64_t>(plan.clip_latents, tp - start);
        const ClipFrames f = clip_frames(plan, len * c.patch_t, overlaps);
        total += f.a1 - f.a0;
        last_overlap = f.b1 - f.b0;
    }
    total += last_overlap - plan.trim_frames;
    if (total < 1) return invalid_argument("decode_video: the clip plan leaves no frames");
    const int64_t oc = c.out_channels, ph = lh * c.patch, pw = lw * c.patch;
    const ops::Context actx = opt.assemble_on_host ? ops::Context::cpu() : ctx; // where clips are assembled
    const bool assembles = !opt.group || opt.group->rank() == 0; // a group's other ranks only decode tiles
    Tensor out;
    if (assembles) {
        // every frame is written by the crossfades below (f0 == total is checked)
        H3_ASSIGN_OR_RETURN(out, empty_overwritten(Shape{oc, total, ph, pw}, DType::kF32, actx.device));
    }
    // the device buffers of the clip loop (decoder outputs, stitched clips), reused from clip to clip
    std::unique_ptr<BufferPool> pool;
    if (!ctx.device.is_cpu()) pool = std::make_unique<BufferPool>(ctx.device);
    Tensor prev; // the previous clip (its overlap part is faded into the next chunk)
    ClipFrames prev_f;
    int64_t f0 = 0;
    const int clips = static_cast<int>(plan.starts.size());
    int clips_done = 0;
    auto clip_done = [&] {
        if (opt.on_clip) opt.on_clip(++clips_done, clips);
    };
    for (int start : plan.starts) {
        const int64_t len = std::min<int64_t>(plan.clip_latents, tp - start);
        Tensor clip_z = Tensor::host(Shape{lc, len, lh, lw}, DType::kF32);
        for (int64_t ch = 0; ch < lc; ++ch)
            std::memcpy(clip_z.data_as<float>() + ch * len * hw,
                        z.data_as<const float>() + (ch * tp + start) * hw,
                        static_cast<size_t>(len * hw) * sizeof(float));
        H3_ASSIGN_OR_RETURN(Tensor clip, decode_clip(ctx, vae, clip_z, opt, pool.get()));
        if (!assembles) {
            clip_done();
            continue;
        }
        const ClipFrames f = clip_frames(plan, clip.dim(1), overlaps);
        const int64_t n = std::min(f.a1 - f.a0, total - f0);
        if (n > 0) {
            ops::CrossfadeParams cp{.frames = n, .src_frame = f.a0, .out_frame = f0};
            if (prev.defined()) {
                const int64_t ov = prev_f.b1 - prev_f.b0;
                cp.fade = std::min({ov, f.a1 - f.a0, static_cast<int64_t>(plan.frame_overlap)});
                cp.prev_frame = prev_f.b1 - cp.fade;
            }
            H3_TRY(ops::crossfade_frames(actx, cp, clip, cp.fade > 0 ? prev : Tensor(), out));
            if (on_final) H3_TRY(on_final(out, f0, f0 + n)); // a later clip never writes these frames
            f0 += n;
        }
        if (overlaps) {
            prev = clip;
            prev_f = f;
        }
        clip_done();
    }
    if (!assembles) return Tensor();
    if (prev.defined() && f0 < total) {
        const int64_t n = std::min(prev_f.b1 - prev_f.b0, total - f0);
        if (n > 0) {
            const ops::CrossfadeParams cp{.frames = n, .src_frame = prev_f.b0, .out_frame = f0};
            H3_TRY(ops::crossfade_frames(actx, cp, prev, Tensor(), out));
            if (on_final) H3_TRY(on_final(out, f0, f0 + n));
            f0 += n;
        }
    }
    if (f0 != total)
        return internal_error("decode_video: assembled " + std::to_string(f0) + " of " +
                              std::to_string(total) + " frames");
    mark(ctx, "assemble");
    return out;
}

// A tensor where it is into a new host tensor: device tensors through double-buffered page-locked chunks
// (a pageable download of the 1.5 GB fp32 sample at 1344×768×124 ran at ~1.5 GB/s).
Result<Tensor> download_result(const ops::Context& ctx, const Tensor& t) {
    if (t.device().is_cpu()) return t;
    return download_chunked(t, ctx.stream());
}

} // namespace

Result<Tensor> decode_video_sample(const ops::Context& ctx, const VideoVae& vae, const Tensor& latents,
                                   const VideoDecodeOptions& opt) {
    H3_ASSIGN_OR_RETURN(Tensor sample, assemble_video_sample(ctx, vae, latents, opt));
    if (!sample.defined()) return Tensor(); // a device group's rank > 0
    H3_ASSIGN_OR_RETURN(Tensor host, download_result(ctx, sample));
    mark(ctx, "download");
    vae_profile::print("decode");
    return host;
}

namespace {

// The frames of each clip as they are final, to options.frames_sink: made where the sample is assembled
// (ops::sample_to_rgb8) into a buffer of a double-buffered ChunkDownload (core/chunk_download.h), whose copy
// to a page-locked buffer runs on a copy stream while the decoder goes on with the next clip; each part is
// handed to the sink once its copy has landed, one clip later (at once on the host).
Status stream_video_frames(const ops::Context& ctx, const VideoVae& vae, const Tensor& latents,
                           const VideoDecodeOptions& opt) {
    // a slot holds one clip's final frames: 17 at 1344x768 are 52 MB (the buffers grow if need be)
    constexpr size_t kSlotBytes = size_t{64} << 20;
    const bool on_host = opt.assemble_on_host || ctx.device.is_cpu();
    H3_ASSIGN_OR_RETURN(auto transfer,
                        make_chunk_transfer(on_host ? Device::cpu() : ctx.device, ctx.stream(), kSlotBytes));
    ChunkDownload download(std::move(transfer), opt.frames_sink);
    const FinalFrames on_final = [&](const Tensor& sample, int64_t a, int64_t b) -> Status {
        H3_ASSIGN_OR_RETURN(Tensor part,
                            download.next(Shape{b - a, sample.dim(2), sample.dim(3), 3}, DType::kU8));
        const ops::Context fctx = sample.device().is_cpu() ? ops::Context::cpu() : ctx;
        H3_TRY(ops::sample_to_rgb8(fctx, {}, sample.slice(1, a, b), part)); // writes every value
        return download.commit();
    };
    H3_ASSIGN_OR_RETURN(Tensor sample, assemble_video_sample(ctx, vae, latents, opt, on_final));
    H3_TRY(download.finish());
    mark(ctx, "rgb8 + download per clip");
    vae_profile::print("decode");
    return ok_status();
}

} // namespace

Result<Tensor> decode_video_frames(const ops::Context& ctx, const VideoVae& vae, const Tensor& latents,
                                   const VideoDecodeOptions& opt) {
    if (opt.frames_sink) {
        H3_TRY(stream_video_frames(ctx, vae, latents, opt));
        return Tensor();
    }
    H3_ASSIGN_OR_RETURN(Tensor sample, assemble_video_sample(ctx, vae, latents, opt));
    if (!sample.defined()) return Tensor(); // a device group's rank > 0
    // the frames where the sample is: 1 byte per value instead of 4 cross to the host (0.37 GB at
    // 1344×768×124)
    const ops::Context fctx = sample.device().is_cpu() ? ops::Context::cpu() : ctx;
    H3_ASSIGN_OR_RETURN(Tensor frames,
                        empty_overwritten(Shape{sample.dim(1), sample.dim(2), sample.dim(3), 3}, DType::kU8,
                                          sample.device()));
    H3_TRY(ops::sample_to_rgb8(fctx, {}, sample, frames)); // writes every value
    mark(ctx, "rgb8");
    H3_ASSIGN_OR_RETURN(Tensor host, download_result(ctx, frames));
    mark(ctx, "download");
    vae_profile::print("decode");
    return host;
}

Tensor sample_to_rgb8(const Tensor& sample) {
    H3_CHECK(sample.rank() == 4 && sample.device().is_cpu(),
             "sample_to_rgb8: expected a host [3, F, H, W] sample, got " << sample.describe());
    Tensor frames = Tensor::host(Shape{sample.dim(1), sample.dim(2), sample.dim(3), 3}, DType::kU8);
    const Status st = ops::sample_to_rgb8(ops::Context::cpu(), {}, sample, frames);
    H3_CHECK(st.ok(), st.to_string());
    return frames;
}

} // namespace h3::model
