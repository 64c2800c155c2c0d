// The DiT blocks' video sparse attention (FastH3, spec §12): the request's tile map and one block's sparse
// attention with the optional compression branch. FastVideo's video_sparse_attn_h3 backend is the reference:
// scores are computed whenever the layer is sparse or the checkpoint carries compression gates; a layer kept
// dense (sparsity 0, vsa dense_layers, dense_first_n_steps) still adds the compression branch.
#include "core/one_time_work.h"
#include "model/dit/dit_model.h"

#include "ops/ops.h"

namespace h3::model {

namespace {

// A [shape] tensor in `t` on `device`, reallocated when the shape or dtype changes.
Status ensure(Tensor& t, const Shape& shape, DType dtype, const Device& device) {
    if (t.defined() && t.shape() == shape && t.dtype() == dtype) return ok_status();
    H3_ASSIGN_OR_RETURN(t, Tensor::empty(shape, dtype, device));
    note_workspace_allocation(static_cast<size_t>(shape.numel()) * dtype_size(dtype)); // one-time work
    return ok_status();
}

} // namespace

Result<std::shared_ptr<const ops::VsaTiles>> DitModel::prepare_vsa_tiles(const DitPackedInputs& in) const {
    const PackedSegments& seg = in.segments;
    if (!seg.defined())
        return invalid_argument(
            "attention vsa needs the packed [text | keyframes | audio | video] layout of a t2va or fl2va "
            "request; these inputs carry no such segments (use dense attention)");
    ops::VsaGeometry g{
        .prefix_segments = seg.prefix, .grid_t = seg.video_t, .grid_h = seg.video_h, .grid_w = seg.video_w};
    H3_ASSIGN_OR_RETURN(ops::VsaTileMap map, ops::build_vsa_tile_map(g));
    if (map.rows != in.rows)
        return invalid_argument("attention vsa: the segments cover " + std::to_string(map.rows) +
                                " rows but the packed sequence has " + std::to_string(in.rows));
    // The generated video must be the sequence's tail, frame-major: its rows are the last video indices.
    const int64_t video = seg.video_t * seg.video_h * seg.video_w, first = in.rows - video;
    const int64_t nv = static_cast<int64_t>(in.video_indices.size());
    bool tail = nv >= video;
    for (int64_t i = 0; tail && i < video; ++i)
        tail = in.video_indices[static_cast<size_t>(nv - video + i)] == first + i;
    if (!tail)
        return invalid_argument("attention vsa: the generated video rows are not the last " +
                                std::to_string(video) + " packed rows");
    H3_ASSIGN_OR_RETURN(ops::VsaTiles tiles, ops::upload_vsa_tiles(ctx_, map));
    return std::make_shared<const ops::VsaTiles>(std::move(tiles));
}

Status DitModel::vsa_attention(const DitBlockWeights& w, const Tensor& x, const ops::Fp8Activation* x8,
                               const Tensor& q3, const Tensor& k3, const Tensor& v3, Tensor& o3,
                               const VsaLayer& layer, DitScratch& sc) const {
    const ops::VsaTiles& tiles = *layer.tiles;
    const int64_t S = q3.dim(0), H = q3.dim(1), hd = q3.dim(2), n = tiles.num_tiles(),
                  nv = tiles.num_video_tiles;
    const bool gated = w.has_gate();
    const int64_t keep = ops::vsa_keep(layer.sparsity, nv);
    const bool sparse = layer.sparsity > 0.0 && keep < nv;
    if (!sparse && !gated)
        return ops::attention(ctx_, {.fp8 = layer.fp8}, q3, k3, v3, o3); // every tile: dense
    DitScratch::Vsa& b = sc.vsa;
    auto mark = [&](const char* phase) { return layer.timer ? layer.timer->mark(phase) : ok_status(); };
    H3_TRY(ensure(b.pooled, Shape{3, H, n, hd}, DType::kF32, ctx_.device));
    H3_TRY(ensure(b.scores, Shape{H, n, n}, DType::kF32, ctx_.device));
    auto part = [&](int64_t i) { return b.pooled.slice(0, i, i + 1).view({H, n, hd}); };
    Tensor qp = part(0), kp = part(1), vp = part(2);
    // q's and k's tile means, and v's for the compression branch, in one launch.
    Tensor pooled = b.pooled.slice(0, 0, gated ? 3 : 2);
    H3_TRY(ops::vsa_pool_qkv(ctx_, tiles, q3, k3, gated ? v3 : Tensor(), pooled));
    H3_TRY(ops::vsa_tile_scores(ctx_, qp, kp, b.scores));
    H3_TRY(mark("vsa_pool_scores"));
    // Compression branch: o += (x·Gᵀ) ⊙ softmax(Sc)·v̄ of the row's tile; under kFp8 x·Gᵀ is an e4m3 GEMM
    // (on the norm's e4m3 rows x8 when the quantization is fused) unless an exception keeps G in bf16. Its
    // gate (g, [S, H, hd]) and per-tile output (b.oc, from v's tile means vp), the gate add left to the
    // caller.
    Tensor g;
    auto compression = [&]() -> Status {
        H3_TRY(ensure(b.gate, Shape{sc.rows, H * hd}, act_dtype(), ctx_.device));
        Tensor rows = b.gate.slice(0, 0, S); // [S, H·hd]
        H3_TRY(linear_in(x, x8, w.gate_compress, w.fp8.gate_compress, w.fp8.gemm, rows));
        g = rows.view({S, H, hd});
        H3_TRY(mark("vsa_gate_gemm"));
        H3_TRY(ensure(b.oc, Shape{H, n, hd}, DType::kF32, ctx_.device));
        return ops::vsa_compress_tiles(ctx_, b.scores, vp, b.oc);
    };
    const ops::VsaGateAddParams gp{.round_intermediate = act_dtype() != DType::kF32};
    if (layer.gated_out8 && (!gated || layer.fused_gate_add))
        return internal_error("vsa_attention: gated_out8 is for a gated layer with a separate gate add");
    // The separate gate add: into o3, or into the out projection's e4m3 rows (o3 left as the attention wrote
    // it).
    auto gate_add = [&]() -> Status {
        if (layer.gated_out8) return ops::vsa_gate_add_fp8(ctx_, gp, tiles, b.oc, g, o3, *layer.gated_out8);
        return ops::vsa_gate_add(ctx_, gp, tiles, b.oc, g, o3);
    };
    if (sparse) {
        const ops::VsaSelectParams sp{.keep = keep, .compete = layer.compete};
        const int64_t width = ops::vsa_select_width(sp, tiles.num_prefix_tiles, n);
        H3_TRY(ensure(b.lists, Shape{H, nv, width}, DType::kI32, ctx_.device));
        H3_TRY(ops::vsa_select(ctx_, sp, tiles, b.scores, b.lists));
        H3_TRY(mark("vsa_select"));
        ops::BlockSparseAttentionParams ap{.fp8 = layer.fp8};
        if (gated && layer.fused_gate_add) { // the compression first: the sparse attention adds its gate
            H3_TRY(compression());
            H3_TRY(mark("vsa_compression"));
            ap.gate_add = {.oc = &b.oc, .gate = &g, .params = gp};
        }
        H3_TRY(ops::block_sparse_attention(ctx_, ap, tiles, q3, k3, v3, b.lists, o3));
        H3_TRY(mark("vsa_sparse_attention"));
        if (!gated || layer.fused_gate_add) return ok_status();
        H3_TRY(compression());
        H3_TRY(gate_add());
        return mark("vsa_compression");
    }
    H3_TRY(ops::attention(ctx_, {.fp8 = layer.fp8}, q3, k3, v3, o3));
    H3_TRY(mark("vsa_dense_attention"));
    // gated (a dense layer with no gate returned above)
    H3_TRY(compression());
    H3_TRY(gate_add());
    return mark("vsa_compression");
}

} // namespace h3::model
