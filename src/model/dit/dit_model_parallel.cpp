// DitModel on a rank of a device group (model/dit/dit_parallel.h): the checks, the workspace's group
// buffers, tensor parallel's weight slices, Ulysses attention (the ring inside it: dit_ring.cpp) and the fp32
// all-reduce of row-split products.
#include "model/dit/dit_model.h"
#include "model/lora/lora_set.h"
#include "ops/ops.h"

#include <cstring>

namespace h3::model {

namespace {

// A [rows, cols] host copy of src[row0:row0+rows, col0:col0+cols] (src contiguous 2-D on the host).
Tensor host_block(const Tensor& src, int64_t row0, int64_t rows, int64_t col0, int64_t cols) {
    Tensor dst = Tensor::host(Shape{rows, cols}, src.dtype());
    const size_t es = dtype_size(src.dtype());
    const int64_t ld = src.dim(1);
    for (int64_t r = 0; r < rows; ++r)
        std::memcpy(static_cast<uint8_t*>(dst.data()) + static_cast<size_t>(r * cols) * es,
                    static_cast<const uint8_t*>(src.data()) +
                        static_cast<size_t>((row0 + r) * ld + col0) * es,
                    static_cast<size_t>(cols) * es);
    return dst;
}

// Rows [a0, a0+n) and [b0, b0+n) of src stacked.
Tensor host_rows2(const Tensor& src, int64_t a0, int64_t b0, int64_t n) {
    Tensor dst = Tensor::host(Shape{2 * n, src.dim(1)}, src.dtype());
    const size_t row = static_cast<size_t>(src.dim(1)) * dtype_size(src.dtype());
    std::memcpy(dst.data(), static_cast<const uint8_t*>(src.data()) + static_cast<size_t>(a0) * row,
                static_cast<size_t>(n) * row);
    std::memcpy(static_cast<uint8_t*>(dst.data()) + static_cast<size_t>(n) * row,
                static_cast<const uint8_t*>(src.data()) + static_cast<size_t>(b0) * row,
                static_cast<size_t>(n) * row);
    return dst;
}

Tensor index_tensor(const std::vector<int32_t>& v) {
    Tensor t = Tensor::host(Shape{static_cast<int64_t>(v.size())}, DType::kI32);
    if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(int32_t));
    return t;
}

} // namespace

Status DitModel::check_parallel(const DitParallel& p, const DitForwardOptions& o) const {
    H3_TRY(check_parallel_degrees(config_, p.sp_size(), p.tp_size(), p.ring_size()));
    if (p.seq_size() != p.sp_size() * p.ring_size())
        return invalid_argument("the sequence group holds " + std::to_string(p.seq_size()) +
                                " ranks, not sp·ring = " + std::to_string(p.sp_size() * p.ring_size()));
    if (o.attention.is_vsa())
        return invalid_field("attention",
                             "attention vsa runs on one rank (its tile map spans the whole packed "
                             "sequence); use sp 1, ring 1 and tp 1, or attention dense");
    if (p.tp_size() > 1) {
        const DitTpShard* sh = p.tp_shard.get();
        const size_t L = weights_.blocks.size();
        const bool fits =
            sh && sh->size == p.tp_size() && sh->rank == p.tp_rank() &&
            (sh->source ? sh->source->layers() == static_cast<int>(L) : sh->blocks.size() == L) &&
            (precision_ != DitPrecision::kFp8 || sh->fp8.size() == L);
        if (!fits)
            return invalid_argument("parallel.tp " + std::to_string(p.tp_size()) + ": rank " +
                                    std::to_string(p.tp_rank()) +
                                    " has no weight slices for its place (DitModel::make_tp_shard)");
        if (o.lora && !p.tp_lora)
            return invalid_argument("parallel.tp " + std::to_string(p.tp_size()) + ": rank " +
                                    std::to_string(p.tp_rank()) +
                                    " has no slices of the run-time adapters (DitModel::make_tp_lora)");
    }
    return ok_status();
}

namespace {

// The six streamed matrices of a block, in DitTpShard order.
std::array<const Tensor*, 6> six(const DitBlockWeights& b) {
    return {&b.to_q, &b.to_k, &b.to_v, &b.to_out, &b.ff_in, &b.ff_out};
}
std::array<const ops::Fp8Weight*, 6> six_fp8(const DitBlockWeights& b) {
    return {&b.fp8.to_q, &b.fp8.to_k, &b.fp8.to_v, &b.fp8.to_out, &b.fp8.ff_in, &b.fp8.ff_out};
}

// Tensor parallel's cut of the six matrices ([out, in] each) for one rank: q/k/v take the rank's heads (rows
// [t·I/tp, (t+1)·I/tp)), fc1 its rows of the value and of the gate half, to_out and fc2 the matching input
// columns. A per-output-channel vector (int8 or e4m3 scales) is cut as the rows are.
struct TpCut {
    int64_t rank, I, Il, F, Fl;
    static bool row_split(int i) { return i == 3 || i == 5; } // to_out, ff_out: input columns split
    Tensor matrix(int i, const Tensor& m) const {
        switch (i) {
        case 0:
        case 1:
        case 2:
            return host_block(m, rank * Il, Il, 0, m.dim(1));
        case 3:
            return host_block(m, 0, m.dim(0), rank * Il, Il);
        case 4:
            return host_rows2(m, rank * Fl, F + rank * Fl, Fl); // [value | gate]
        default:
            return host_block(m, 0, m.dim(0), rank * Fl, Fl);
        }
    }
    Tensor per_row(int i, const Tensor& v) const {
        if (row_split(i)) return v; // every output channel stays
        const Tensor cut = matrix(i, v.view({v.dim(0), 1}));
        return cut.view({cut.dim(0)});
    }
};

} // namespace

Result<std::shared_ptr<DitTpShard>> DitModel::make_tp_shard(int rank, int size) const {
    H3_TRY(check_parallel_degrees(config_, 1, size));
    if (config_.ffn_dim % size != 0)
        return invalid_argument("parallel.tp " + std::to_string(size) + ": ffn_dim " +
                                std::to_string(config_.ffn_dim) + " does not split evenly");
    const int64_t I = config_.inner_dim(), F = config_.ffn_dim;
    const TpCut cut{rank, I, I / size, F, F / size};
    auto host = [&](const Tensor& t) -> Result<Tensor> {
        H3_ASSIGN_OR_RETURN(Tensor h, t.to(Device::cpu(), ctx_.stream()));
        return h.contiguous();
    };
    auto shard = std::make_shared<DitTpShard>();
    shard->rank = rank;
    shard->size = size;
    const size_t L = weights_.blocks.size();
    if (blocks_) { // int8 and/or layerwise: the slices' masters behind a source of the rank's own
        std::vector<std::vector<WeightMaster>> masters(L);
        for (size_t b = 0; b < L; ++b)
            for (int i = 0; i < 6; ++i) {
                H3_ASSIGN_OR_RETURN(WeightMaster m, blocks_->host_master(static_cast<int>(b), i));
                masters[b].push_back(
                    {cut.matrix(i, m.data), m.scale.defined() ? cut.per_row(i, m.scale) : Tensor()});
            }
        LayerWeightSource::Params params = blocks_->params();
        params.what = "DiT blocks (tensor-parallel rank " + std::to_string(rank) + ")";
        params.pin_also.clear();
        H3_ASSIGN_OR_RETURN(auto source, LayerWeightSource::create(std::move(masters), params, ctx_));
        shard->source = std::move(source);
    } else {
        shard->blocks.resize(L);
        for (size_t b = 0; b < L; ++b)
            for (int i = 0; i < 6; ++i) {
                const Tensor& full = *six(weights_.blocks[b])[static_cast<size_t>(i)];
                if (!full.defined()) continue; // fp8 released the bf16 copy of a quantized layer
                H3_ASSIGN_OR_RETURN(Tensor h, host(full));
                H3_ASSIGN_OR_RETURN(shard->blocks[b][static_cast<size_t>(i)], upload(cut.matrix(i, h)));
            }
    }
    if (precision_ == DitPrecision::kFp8) {
        shard->fp8.resize(L);
        for (size_t b = 0; b < L; ++b)
            for (int i = 0; i < 6; ++i) {
                const ops::Fp8Weight& full = *six_fp8(weights_.blocks[b])[static_cast<size_t>(i)];
                if (!full.defined()) continue; // a layer kept in bf16
                H3_ASSIGN_OR_RETURN(Tensor data, host(full.data));
                H3_ASSIGN_OR_RETURN(Tensor scale, host(full.scale));
                ops::Fp8Weight& w = shard->fp8[b][static_cast<size_t>(i)];
                H3_ASSIGN_OR_RETURN(w.data, upload(cut.matrix(i, data)));
                H3_ASSIGN_OR_RETURN(w.scale, upload(cut.per_row(i, scale)));
            }
    }
    return shard;
}

Result<std::shared_ptr<const LoraSet>> DitModel::make_tp_lora(const LoraSet& lora, int rank, int size) const {
    H3_TRY(check_parallel_degrees(config_, 1, size));
    const int64_t I = config_.inner_dim(), F = config_.ffn_dim;
    const TpCut cut{rank, I, I / size, F, F / size};
    // y += scale·(x·Aᵀ)·Bᵀ: a column-split layer keeps A (x is whole) and takes B's rows of its outputs; a
    // row-split one takes A's columns of its inputs and keeps B — its term joins the fp32 partial before the
    // all-reduce, so the ranks' terms sum to the whole adapter's.
    return lora.map_block_factors(
        [&](LoraProjection p, const LoraDeviceFactor& d) -> Result<LoraDeviceFactor> {
            const int i = static_cast<int>(p);
            LoraDeviceFactor out{.a = d.a, .b = d.b, .scale = d.scale};
            Tensor& part = TpCut::row_split(i) ? out.a : out.b;
            H3_ASSIGN_OR_RETURN(Tensor h, part.to(Device::cpu(), ctx_.stream()));
            H3_ASSIGN_OR_RETURN(h, h.contiguous());
            // A [r, in]: its columns are the input split — TpCut::matrix's column cut applies to [r, in] as
            // to the weight [out, in]; B [out, r]: the rows of the outputs, as the weight's rows.
            H3_ASSIGN_OR_RETURN(part, upload(cut.matrix(i, h)));
            return out;
        });
}

Status DitModel::prepare_parallel_buffers(const DitParallel& p, const SpShard& sh, DitWorkspace& ws) const {
    const DitConfig& c = config_;
    const int64_t D = c.hidden_size, sp = p.sp_size(), tp = p.tp_size(), ring = p.ring_size();
    const int64_t C = sh.padded / ring; // the ring chunk: rows of one Ulysses group
    DitScratch::Parallel& par = ws.scratch.par;
    par.group = &p;
    par.shard = sh;
    auto zeros = [&](const Shape& s, DType t) -> Result<Tensor> {
        Tensor z = Tensor::host(s, t);
        std::memset(z.data(), 0, z.nbytes());
        return upload(z);
    };
    const int64_t X = c.inner_dim() / (tp * sp), Hs = c.num_attention_heads / (tp * sp);
    par.groups = p.sp ? ulysses_overlap_groups(Hs, p.overlap_groups, p.ring != nullptr) : 1;
    if (p.sp) {
        const int64_t L = sh.local;
        const int64_t G = par.groups;
        H3_ASSIGN_OR_RETURN(par.send, alloc(Shape{C, X}, act_dtype()));
        if (G > 1) { // the three packed inputs wait side by side for their collectives on the lane
            H3_ASSIGN_OR_RETURN(par.send_k, alloc(Shape{C, X}, act_dtype()));
            H3_ASSIGN_OR_RETURN(par.send_v, alloc(Shape{C, X}, act_dtype()));
        }
        H3_ASSIGN_OR_RETURN(par.q, alloc(Shape{C, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.k, alloc(Shape{C, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.v, alloc(Shape{C, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.o, zeros(Shape{C, X}, act_dtype())); // padding queries: zero rows
        // The shard's rows as W-wide pieces (W = X/G: one head group of one Ulysses rank's heads), piece
        // (l·sp + j)·G + g = row l, Ulysses rank j, group g; packed group-major, then rank, then row.
        std::vector<int32_t> pack(static_cast<size_t>(L * sp * G)), unpack(pack.size());
        for (int64_t g = 0; g < G; ++g)
            for (int64_t j = 0; j < sp; ++j)
                for (int64_t l = 0; l < L; ++l) {
                    const int64_t packed = (g * sp + j) * L + l, piece = (l * sp + j) * G + g;
                    pack[static_cast<size_t>(packed)] = static_cast<int32_t>(piece);
                    unpack[static_cast<size_t>(piece)] = static_cast<int32_t>(packed);
                }
        H3_ASSIGN_OR_RETURN(par.pack, upload(index_tensor(pack)));
        H3_ASSIGN_OR_RETURN(par.unpack, upload(index_tensor(unpack)));
    }
    // The communication lane: the Ulysses groups' all-to-alls, the ring's K/V gathers (not with overlap
    // groups 1: every collective then runs on the compute stream).
    par.lane.reset();
    if (par.groups > 1 || (p.ring && p.overlap_groups != 1)) {
        H3_ASSIGN_OR_RETURN(auto lane, ops::CommLane::create(ctx_));
        par.lane = std::move(lane);
    }
    if (p.ring) { // every chunk's K/V, the fp32 accumulator (padding rows stay zero) and one partial
        H3_ASSIGN_OR_RETURN(par.k_all, alloc(Shape{sh.padded, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.v_all, alloc(Shape{sh.padded, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.o_acc, zeros(Shape{C, Hs, c.attention_head_dim}, DType::kF32));
        H3_ASSIGN_OR_RETURN(par.lse_acc, alloc(Shape{C, Hs}, DType::kF32));
        H3_ASSIGN_OR_RETURN(par.o_part, alloc(Shape{C, Hs, c.attention_head_dim}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.lse_part, alloc(Shape{C, Hs}, DType::kF32));
    }
    if (p.seq) {
        H3_ASSIGN_OR_RETURN(ws.h_full, zeros(Shape{sh.padded, D}, residual_dtype()));
        H3_ASSIGN_OR_RETURN(ws.h_gather, alloc(Shape{sh.padded, D}, residual_dtype()));
        H3_ASSIGN_OR_RETURN(ws.y_full, alloc(Shape{sh.padded, D}, act_dtype()));
    }
    if (tp > 1) {
        H3_ASSIGN_OR_RETURN(par.partial, alloc(Shape{sh.local, D}, DType::kF32));
    }
    return ok_status();
}

Status DitModel::sequence_attention(const Tensor& q3, const Tensor& k3, const Tensor& v3, Tensor& o3,
                                    DitScratch& sc, bool fp8) const {
    DitScratch::Parallel& par = sc.par;
    const DitParallel& g = *par.group;
    const int64_t sp = g.sp_size(), ring = g.ring_size(), L = q3.dim(0), H = q3.dim(1), hd = q3.dim(2);
    const int64_t Hs = H / sp, X = Hs * hd, S = par.shard.rows, C = par.shard.padded / ring;
    H3_CHECK(L == par.shard.local && H % sp == 0 && L * sp == C,
             "sequence attention over " << L << " rows × " << H << " heads");
    if (!g.sp) { // the ring alone: this rank's rows are its chunk
        return ring_attention(q3, k3, v3, o3, sc, fp8);
    }
    // [L, sp, X] → [sp, L, X]: chunk j (the shard's rows, head group j) goes to rank j, which receives every
    // Ulysses rank's rows of its head group: [C, Hs, hd] in sequence order (C = all rows without a ring).
    if (par.groups > 1) return grouped_sequence_attention(q3, k3, v3, o3, sc, fp8);
    auto scatter_heads = [&](const Tensor& t3, Tensor& recv) -> Status {
        Tensor send = par.send;
        H3_TRY(ops::gather_rows(ctx_, t3.view({L * sp, X}), par.pack, send));
        return g.sp->all_to_all(ctx_, send, recv);
    };
    H3_TRY(scatter_heads(q3, par.q));
    H3_TRY(scatter_heads(k3, par.k));
    H3_TRY(scatter_heads(v3, par.v));
    Tensor q = par.q.view({C, Hs, hd}), k = par.k.view({C, Hs, hd}), v = par.v.view({C, Hs, hd});
    Tensor o = par.o.view({C, Hs, hd});
    if (g.ring) {
        H3_TRY(ring_attention(q, k, v, o, sc, fp8));
    } else { // the padding rows are the last C − S: attention over the first S is exact
        Tensor oa = o.slice(0, 0, S);
        H3_TRY(ops::attention(ctx_, {.fp8 = fp8}, q.slice(0, 0, S), k.slice(0, 0, S), v.slice(0, 0, S), oa));
    }
    // Back: chunk j of o (rank j's rows, this head group) to rank j; [sp, L, X] → [L, sp, X].
    Tensor back = par.send;
    H3_TRY(g.sp->all_to_all(ctx_, par.o, back));
    Tensor rows = o3.view({L * sp, X});
    return ops::gather_rows(ctx_, back, par.unpack, rows);
}

// Ulysses in G head groups (no ring): the three packs on the compute stream, then on the lane every group's
// q/k/v all-to-alls; group g's attention waits only for its own three, and its output's all-to-all back
// (on the lane) runs under group g+1's attention. The compute stream joins the lane before the unpack.
Status DitModel::grouped_sequence_attention(const Tensor& q3, const Tensor& k3, const Tensor& v3, Tensor& o3,
                                            DitScratch& sc, bool fp8) const {
    DitScratch::Parallel& par = sc.par;
    const DitParallel& g = *par.group;
    const int64_t sp = g.sp_size(), L = q3.dim(0), H = q3.dim(1), hd = q3.dim(2);
    const int64_t Hs = H / sp, X = Hs * hd, S = par.shard.rows, C = par.shard.padded;
    const int64_t G = par.groups, W = X / G, Hg = Hs / G, P = L * sp; // P: rows of one group's pack
    H3_CHECK(par.lane && G > 1 && Hs % G == 0 && P == C, "grouped Ulysses over " << G << " groups");
    ops::CommLane& lane = *par.lane;
    Tensor* sends[3] = {&par.send, &par.send_k, &par.send_v};
    const Tensor* ins[3] = {&q3, &k3, &v3};
    for (int i = 0; i < 3; ++i) {
        Tensor dst = sends[i]->view({G * P, W});
        H3_TRY(ops::gather_rows(ctx_, ins[i]->view({L * sp * G, W}), par.pack, dst));
    }
    H3_TRY(lane.wait_for(ctx_));
    const ops::Context& lc = lane.context();
    auto group_rows = [&](const Tensor& t, int64_t gi) {
        return t.view({G * P, W}).slice(0, gi * P, (gi + 1) * P);
    };
    Tensor* recvs[3] = {&par.q, &par.k, &par.v};
    for (int64_t gi = 0; gi < G; ++gi) {
        for (int i = 0; i < 3; ++i) {
            Tensor recv = group_rows(*recvs[i], gi);
            H3_TRY(g.sp->all_to_all(lc, group_rows(*sends[i], gi), recv));
        }
        H3_TRY(lane.mark(static_cast<int>(gi)));
    }
    Tensor back = par.send; // free once the lane ran the q all-to-alls (the lane runs in order)
    for (int64_t gi = 0; gi < G; ++gi) {
        H3_TRY(lane.wait_mark(ctx_, static_cast<int>(gi)));
        Tensor q = group_rows(par.q, gi).view({C, Hg, hd}), k = group_rows(par.k, gi).view({C, Hg, hd}),
               v = group_rows(par.v, gi).view({C, Hg, hd});
        Tensor og = group_rows(par.o, gi).view({C, Hg, hd});
        Tensor oa = og.slice(0, 0, S); // the padding rows (the last C − S) stay zero
        H3_TRY(ops::attention(ctx_, {.fp8 = fp8}, q.slice(0, 0, S), k.slice(0, 0, S), v.slice(0, 0, S), oa));
        H3_TRY(lane.wait_for(ctx_));
        Tensor bg = group_rows(back, gi);
        H3_TRY(g.sp->all_to_all(lc, group_rows(par.o, gi), bg));
    }
    H3_TRY(lane.mark(0));
    H3_TRY(lane.wait_mark(ctx_, 0));
    Tensor rows = o3.view({L * sp * G, W});
    return ops::gather_rows(ctx_, back.view({G * P, W}), par.unpack, rows);
}

Status DitModel::reduce_partial(Tensor& out, DitScratch& sc) const {
    Tensor partial = sc.par.partial.slice(0, 0, out.dim(0));
    H3_TRY(sc.par.group->tp->all_reduce_sum(ctx_, partial));
    return ops::cast(ctx_, partial, out);
}

} // namespace h3::model
