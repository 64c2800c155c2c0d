// VSA dispatchers: the tile map (host), validation, then the CPU reference or the CUDA implementation.
#include "ops/vsa.h"
#include "ops/provenance.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <tuple>

namespace h3::ops {

using namespace detail;

namespace {

std::string geometry_text(const VsaGeometry& g) {
    std::ostringstream os;
    os << "prefix segments [";
    for (size_t i = 0; i < g.prefix_segments.size(); ++i) os << (i ? ", " : "") << g.prefix_segments[i];
    os << "], video grid " << g.grid_t << "×" << g.grid_h << "×" << g.grid_w;
    return os.str();
}

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

// A rank-1 i32 tensor of the map's values on ctx's device.
Result<Tensor> i32_tensor(const Context& ctx, const std::vector<int32_t>& v) {
    Tensor t = Tensor::host(Shape{static_cast<int64_t>(v.size())}, DType::kI32);
    if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(int32_t));
    if (ctx.device.is_cpu()) return t;
    return t.to(ctx.device, ctx.stream());
}

Status check_tiles(const char* op, const Context& ctx, const VsaTiles& t) {
    if (t.num_video_tiles < 1 || t.num_prefix_tiles < 0 || t.rows < 1)
        return invalid_argument(std::string(op) + ": the tile map is empty (" + std::to_string(t.rows) +
                                " rows, " + std::to_string(t.num_video_tiles) + " video tiles)");
    const int64_t n = t.num_tiles();
    H3_TRY(check_tensor(op, "tiles.slot_rows", ctx, t.slot_rows));
    H3_TRY(check_tensor(op, "tiles.tile_sizes", ctx, t.tile_sizes));
    H3_TRY(check_tensor(op, "tiles.row_tiles", ctx, t.row_tiles));
    for (auto [name, tensor, len] : {std::tuple{"tiles.slot_rows", &t.slot_rows, n * kVsaTileRows},
                                     std::tuple{"tiles.tile_sizes", &t.tile_sizes, n},
                                     std::tuple{"tiles.row_tiles", &t.row_tiles, t.rows}}) {
        if (tensor->dtype() != DType::kI32 || !(tensor->shape() == Shape{len}) || !tensor->is_contiguous())
            return invalid_argument(std::string(op) + ": " + name + " is " + desc(*tensor) +
                                    " but must be a contiguous i32[" + std::to_string(len) + "]");
    }
    return ok_status();
}

// x [rows, H, D] float, contiguous, with the tile map's row count.
Status check_rows_hd(const char* op, const char* name, const Context& ctx, const Tensor& x, int64_t rows) {
    H3_TRY(check_float_contig(op, name, ctx, x));
    H3_TRY(check_rank(op, name, x, 3));
    if (x.dim(0) != rows)
        return invalid_argument(std::string(op) + ": " + name + " is " + desc(x) + " but the tile map has " +
                                std::to_string(rows) + " rows");
    if (x.dim(1) < 1 || x.dim(2) < 1)
        return invalid_argument(std::string(op) + ": " + name + " is " + desc(x) +
                                " with no heads or channels");
    return ok_status();
}

Status check_f32(const char* op, const char* name, const Context& ctx, const Tensor& t, const Shape& shape) {
    H3_TRY(check_tensor(op, name, ctx, t));
    if (t.dtype() != DType::kF32)
        return invalid_argument(std::string(op) + ": " + name + " is " + desc(t) + " but must be f32");
    H3_TRY(check_contiguous(op, name, t));
    return check_shape(op, name, t, shape);
}

// Whether a's bytes and b's bytes overlap.
bool shares_memory(const Tensor& a, const Tensor& b) {
    const auto* pa = static_cast<const uint8_t*>(a.data());
    const auto* pb = static_cast<const uint8_t*>(b.data());
    return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// block_sparse_attention's optional gate add (VsaFusedGateAdd): both tensors or neither; errors name the
// field.
Status check_fused_gate_add(const char* op, const Context& ctx, const VsaFusedGateAdd& g,
                            const VsaTiles& tiles, const Tensor& o) {
    if (g.oc == nullptr && g.gate == nullptr) return ok_status();
    if (g.oc == nullptr || g.gate == nullptr)
        return invalid_argument(std::string(op) + ": gate_add." + (g.oc ? "gate" : "oc") +
                                " is null but gate_add." + (g.oc ? "oc" : "gate") +
                                " is set; the gate add takes both");
    H3_TRY(check_float_contig(op, "gate_add.gate", ctx, *g.gate));
    H3_TRY(check_shape(op, "gate_add.gate", *g.gate, o.shape(), "o's shape"));
    H3_TRY(check_f32(op, "gate_add.oc", ctx, *g.oc, Shape{o.dim(1), tiles.num_tiles(), o.dim(2)}));
    for (auto [name, t] :
         {std::pair<const char*, const Tensor*>{"gate_add.gate", g.gate}, {"gate_add.oc", g.oc}})
        if (shares_memory(*t, o))
            return invalid_argument(std::string(op) + ": " + name + " " + desc(*t) +
                                    " shares memory with o; the gate add reads it while o is written");
    return ok_status();
}

} // namespace

Result<VsaTileMap> build_vsa_tile_map(const VsaGeometry& g) {
    if (g.grid_t < 1 || g.grid_h < 1 || g.grid_w < 1)
        return invalid_argument("VSA tiling: the video grid is empty (" + geometry_text(g) + ")");
    VsaTileMap m;
    int64_t prefix_rows = 0;
    for (int64_t s : g.prefix_segments) {
        if (s < 0) return invalid_argument("VSA tiling: negative segment size (" + geometry_text(g) + ")");
        prefix_rows += s;
    }
    const int64_t video_rows = g.grid_t * g.grid_h * g.grid_w;
    m.rows = prefix_rows + video_rows;
    if (m.rows > std::numeric_limits<int32_t>::max())
        return invalid_argument("VSA tiling: " + std::to_string(m.rows) + " rows do not fit i32 indices");
    auto add_tile = [&](const std::vector<int32_t>& rows) {
        const int32_t tile = static_cast<int32_t>(m.tile_sizes.size());
        m.tile_sizes.push_back(static_cast<int32_t>(rows.size()));
        for (int s = 0; s < kVsaTileRows; ++s) {
            const int32_t r = s < static_cast<int>(rows.size()) ? rows[static_cast<size_t>(s)] : -1;
            m.slot_rows.push_back(r);
            if (r >= 0) m.row_tiles[static_cast<size_t>(r)] = tile;
        }
    };
    m.row_tiles.assign(static_cast<size_t>(m.rows), -1);
    // Prefix: consecutive tiles inside each segment.
    int64_t base = 0;
    std::vector<int32_t> rows;
    for (int64_t s : g.prefix_segments) {
        for (int64_t r0 = 0; r0 < s; r0 += kVsaTileRows) {
            rows.clear();
            for (int64_t r = r0; r < std::min<int64_t>(s, r0 + kVsaTileRows); ++r)
                rows.push_back(static_cast<int32_t>(base + r));
            add_tile(rows);
        }
        base += s;
    }
    m.num_prefix_tiles = static_cast<int64_t>(m.tile_sizes.size());
    // Video: (4, 4, 4) cubes in (t, h, w) tile order, rows inside a cube in (t, h, w) order.
    const int64_t nt = ceil_div(g.grid_t, kVsaCube[0]), nh = ceil_div(g.grid_h, kVsaCube[1]),
                  nw = ceil_div(g.grid_w, kVsaCube[2]);
    for (int64_t it = 0; it < nt; ++it)
        for (int64_t ih = 0; ih < nh; ++ih)
            for (int64_t iw = 0; iw < nw; ++iw) {
                rows.clear();
                for (int64_t t = it * kVsaCube[0]; t < std::min<int64_t>(g.grid_t, (it + 1) * kVsaCube[0]);
                     ++t)
                    for (int64_t h = ih * kVsaCube[1];
                         h < std::min<int64_t>(g.grid_h, (ih + 1) * kVsaCube[1]); ++h)
                        for (int64_t w = iw * kVsaCube[2];
                             w < std::min<int64_t>(g.grid_w, (iw + 1) * kVsaCube[2]); ++w)
                            rows.push_back(
                                static_cast<int32_t>(prefix_rows + (t * g.grid_h + h) * g.grid_w + w));
                add_tile(rows);
            }
    m.num_video_tiles = static_cast<int64_t>(m.tile_sizes.size()) - m.num_prefix_tiles;
    return m;
}

Result<VsaTiles> upload_vsa_tiles(const Context& ctx, const VsaTileMap& map) {
    VsaTiles t;
    t.rows = map.rows;
    t.num_prefix_tiles = map.num_prefix_tiles;
    t.num_video_tiles = map.num_video_tiles;
    H3_ASSIGN_OR_RETURN(t.slot_rows, i32_tensor(ctx, map.slot_rows));
    H3_ASSIGN_OR_RETURN(t.tile_sizes, i32_tensor(ctx, map.tile_sizes));
    H3_ASSIGN_OR_RETURN(t.row_tiles, i32_tensor(ctx, map.row_tiles));
    return t;
}

int64_t vsa_keep(double sparsity, int64_t n) {
    const int64_t keep = static_cast<int64_t>(std::ceil((1.0 - sparsity) * static_cast<double>(n)));
    return std::max<int64_t>(1, std::min(keep, n));
}

int64_t vsa_select_width(const VsaSelectParams& p, int64_t num_prefix_tiles, int64_t num_tiles) {
    if (!p.compete || num_prefix_tiles == 0) return num_prefix_tiles + p.keep;
    return std::min(p.keep + num_prefix_tiles, num_tiles);
}

Status vsa_pool(const Context& ctx, const VsaTiles& tiles, const Tensor& x, Tensor& out) {
    const char* op = "vsa_pool";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tiles(op, ctx, tiles));
    H3_TRY(check_rows_hd(op, "x", ctx, x, tiles.rows));
    H3_TRY(check_writable(op, "out", out));
    H3_TRY(check_f32(op, "out", ctx, out, Shape{x.dim(1), tiles.num_tiles(), x.dim(2)}));
    H3_OPS_DISPATCH(vsa_pool, ctx, tiles, x, out);
}

Status vsa_pool_qkv(const Context& ctx, const VsaTiles& tiles, const Tensor& q, const Tensor& k,
                    const Tensor& v, Tensor& out) {
    const char* op = "vsa_pool_qkv";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tiles(op, ctx, tiles));
    H3_TRY(check_rows_hd(op, "q", ctx, q, tiles.rows));
    const int64_t count = v.defined() ? 3 : 2;
    for (auto [name, t] : {std::pair<const char*, const Tensor*>{"k", &k}, {"v", &v}}) {
        if (!t->defined()) continue;
        H3_TRY(check_rows_hd(op, name, ctx, *t, tiles.rows));
        H3_TRY(check_shape(op, name, *t, q.shape(), "q's shape"));
        if (t->dtype() != q.dtype())
            return invalid_argument(std::string("vsa_pool_qkv: ") + name + " is " + desc(*t) + " but q is " +
                                    desc(q) + "; q, k and v share a dtype");
    }
    H3_TRY(check_writable(op, "out", out));
    H3_TRY(check_f32(op, "out", ctx, out, Shape{count, q.dim(1), tiles.num_tiles(), q.dim(2)}));
    H3_OPS_DISPATCH(vsa_pool_qkv, ctx, tiles, q, k, v, out);
}

Status vsa_tile_scores(const Context& ctx, const Tensor& q, const Tensor& k, Tensor& scores) {
    const char* op = "vsa_tile_scores";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tensor(op, "q_pooled", ctx, q));
    H3_TRY(check_rank(op, "q_pooled", q, 3));
    H3_TRY(check_f32(op, "q_pooled", ctx, q, q.shape()));
    H3_TRY(check_f32(op, "k_pooled", ctx, k, q.shape()));
    H3_TRY(check_writable(op, "scores", scores));
    H3_TRY(check_f32(op, "scores", ctx, scores, Shape{q.dim(0), q.dim(1), q.dim(1)}));
    if (q.dim(2) < 1) return invalid_argument("vsa_tile_scores: q_pooled " + desc(q) + " has no channels");
    H3_OPS_DISPATCH(vsa_tile_scores, ctx, q, k, scores);
}

Status vsa_select(const Context& ctx, const VsaSelectParams& p, const VsaTiles& tiles, const Tensor& scores,
                  Tensor& lists) {
    const char* op = "vsa_select";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tiles(op, ctx, tiles));
    const int64_t n = tiles.num_tiles(), P = tiles.num_prefix_tiles, nv = tiles.num_video_tiles;
    if (p.keep < 1 || p.keep > nv)
        return invalid_argument("vsa_select: keep " + std::to_string(p.keep) + " must lie in [1, " +
                                std::to_string(nv) + "] (the video tiles)");
    H3_TRY(check_tensor(op, "scores", ctx, scores));
    H3_TRY(check_rank(op, "scores", scores, 3));
    H3_TRY(check_f32(op, "scores", ctx, scores, Shape{scores.dim(0), n, n}));
    H3_TRY(check_tensor(op, "lists", ctx, lists));
    H3_TRY(check_writable(op, "lists", lists));
    const int64_t width = vsa_select_width(p, P, n);
    if (lists.dtype() != DType::kI32 || !lists.is_contiguous() ||
        !(lists.shape() == Shape{scores.dim(0), nv, width}))
        return invalid_argument("vsa_select: lists is " + desc(lists) + " but must be a contiguous i32[" +
                                std::to_string(scores.dim(0)) + ", " + std::to_string(nv) + ", " +
                                std::to_string(width) + "]");
    H3_OPS_DISPATCH(vsa_select, ctx, p, tiles, scores, lists);
}

Status block_sparse_attention(const Context& ctx, const BlockSparseAttentionParams& p, const VsaTiles& tiles,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lists,
                              Tensor& o) {
    const char* op = "block_sparse_attention";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tiles(op, ctx, tiles));
    H3_TRY(check_rows_hd(op, "q", ctx, q, tiles.rows));
    for (auto [name, t] : {std::pair<const char*, const Tensor*>{"k", &k}, {"v", &v}, {"o", &o}}) {
        H3_TRY(check_float_contig(op, name, ctx, *t));
        H3_TRY(check_shape(op, name, *t, q.shape(), "q's shape"));
        if (t->dtype() != q.dtype())
            return invalid_argument(std::string("block_sparse_attention: ") + name + " is " + desc(*t) +
                                    " but q is " + desc(q) + "; q, k, v and o share a dtype");
    }
    H3_TRY(check_writable(op, "o", o));
    H3_TRY(check_tensor(op, "lists", ctx, lists));
    if (lists.dtype() != DType::kI32 || !lists.is_contiguous() || lists.rank() != 3 ||
        lists.dim(0) != q.dim(1) || lists.dim(1) != tiles.num_video_tiles || lists.dim(2) < 1 ||
        lists.dim(2) > tiles.num_tiles())
        return invalid_argument("block_sparse_attention: lists is " + desc(lists) +
                                " but must be a contiguous i32[" + std::to_string(q.dim(1)) + ", " +
                                std::to_string(tiles.num_video_tiles) +
                                ", width] with 1 <= width <= " + std::to_string(tiles.num_tiles()));
    H3_TRY(check_index_values(op, "lists", lists, tiles.num_tiles(), "tiles"));
    if (lists.device().is_cpu()) { // device lists are not read back (see ops/cuda/cuda_ops.h)
        const int32_t* l = lists.data_as<const int32_t>();
        const int64_t w = lists.dim(2);
        for (int64_t i = 0; i < lists.numel(); ++i)
            if (i % w && l[i] <= l[i - 1])
                return invalid_argument("block_sparse_attention: lists[" + std::to_string(i / w) +
                                        "] is not "
                                        "strictly ascending at position " +
                                        std::to_string(i % w));
    }
    if (p.fp8 && q.dtype() != DType::kBF16)
        return invalid_argument("block_sparse_attention: the fp8 mode takes bf16 q, k, v and o; q is " +
                                desc(q));
    if (p.hopper_stages != 0 && (p.hopper_stages < 2 || p.hopper_stages > 4))
        return invalid_argument("block_sparse_attention: hopper_stages = " + std::to_string(p.hopper_stages) +
                                " must be 0 (the default) or 2, 3, 4");
    H3_TRY(check_fused_gate_add(op, ctx, p.gate_add, tiles, o));
    BlockSparseAttentionParams r = p;
    if (r.scale == 0.0f) r.scale = 1.0f / std::sqrt(static_cast<float>(q.dim(2)));
    if (!(r.scale > 0.0f) || !std::isfinite(r.scale))
        return invalid_argument("block_sparse_attention: scale = " + std::to_string(p.scale) +
                                " must be finite and > 0");
    if (ctx.is_cuda() || p.gate_add.gate == nullptr) {
        if (!ctx.is_cuda()) note_impl(OpFamily::kSparseAttention, r.fp8 ? "cpu-e4m3" : "cpu");
        H3_OPS_DISPATCH(block_sparse_attention, ctx, r, tiles, q, k, v, lists, o); // CUDA: fused or not
    }
    // The CPU: the attention, then the gate add (the same two ops a caller would run).
    r.gate_add = {};
    H3_TRY(block_sparse_attention(ctx, r, tiles, q, k, v, lists, o));
    const VsaFusedGateAdd& g = p.gate_add;
    return vsa_gate_add(ctx, g.params, tiles, *g.oc, *g.gate, o);
}

Status vsa_compress_tiles(const Context& ctx, const Tensor& scores, const Tensor& v_pooled, Tensor& oc) {
    const char* op = "vsa_compress_tiles";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tensor(op, "scores", ctx, scores));
    H3_TRY(check_rank(op, "scores", scores, 3));
    H3_TRY(check_f32(op, "scores", ctx, scores, Shape{scores.dim(0), scores.dim(1), scores.dim(1)}));
    H3_TRY(check_tensor(op, "v_pooled", ctx, v_pooled));
    H3_TRY(check_rank(op, "v_pooled", v_pooled, 3));
    H3_TRY(check_f32(op, "v_pooled", ctx, v_pooled, Shape{scores.dim(0), scores.dim(1), v_pooled.dim(2)}));
    H3_TRY(check_writable(op, "oc", oc));
    H3_TRY(check_f32(op, "oc", ctx, oc, v_pooled.shape()));
    if (scores.dim(1) < 1)
        return invalid_argument("vsa_compress_tiles: scores " + desc(scores) + " has no tiles");
    H3_OPS_DISPATCH(vsa_compress_tiles, ctx, scores, v_pooled, oc);
}

Status vsa_gate_add(const Context& ctx, const VsaGateAddParams& p, const VsaTiles& tiles, const Tensor& oc,
                    const Tensor& gate, Tensor& o) {
    const char* op = "vsa_gate_add";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tiles(op, ctx, tiles));
    H3_TRY(check_rows_hd(op, "o", ctx, o, tiles.rows));
    H3_TRY(check_writable(op, "o", o));
    H3_TRY(check_float_contig(op, "gate", ctx, gate));
    H3_TRY(check_shape(op, "gate", gate, o.shape(), "o's shape"));
    H3_TRY(check_f32(op, "oc", ctx, oc, Shape{o.dim(1), tiles.num_tiles(), o.dim(2)}));
    H3_OPS_DISPATCH(vsa_gate_add, ctx, p, tiles, oc, gate, o);
}

Status vsa_gate_add_fp8(const Context& ctx, const VsaGateAddParams& p, const VsaTiles& tiles,
                        const Tensor& oc, const Tensor& gate, const Tensor& o, Fp8Activation& out) {
    const char* op = "vsa_gate_add_fp8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tiles(op, ctx, tiles));
    H3_TRY(check_rows_hd(op, "o", ctx, o, tiles.rows));
    H3_TRY(check_float_contig(op, "gate", ctx, gate));
    H3_TRY(check_shape(op, "gate", gate, o.shape(), "o's shape"));
    for (auto [name, t] : {std::pair{"o", &o}, std::pair{"gate", &gate}})
        if (t->dtype() != DType::kBF16)
            return invalid_argument(std::string(op) + ": " + name + " is " + desc(*t) + " but must be bf16");
    H3_TRY(check_f32(op, "oc", ctx, oc, Shape{o.dim(1), tiles.num_tiles(), o.dim(2)}));
    H3_TRY(check_fp8_out(op, ctx, out, o.dim(0), o.dim(1) * o.dim(2), "[o rows, H·D]"));
    note_impl(OpFamily::kFp8Quantization, "fused");
    H3_OPS_DISPATCH(vsa_gate_add_fp8, ctx, p, tiles, oc, gate, o, out);
}

} // namespace h3::ops
