// DitModel on a rank of a device group (model/dit/dit_parallel.h): the checks, the workspace's group
// buffers, tensor parallel's weight slices, Ulysses attention (the ring inside it: dit_ring.cpp) and the fp32
// all-reduce of row-split products.
#include "model/dit/dit_model.h"
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
    if (p.ring && precision_ == DitPrecision::kFp8)
        return invalid_field("ring", "ring merges attention partials by their log-sum-exp, which the fp8 "
                                     "attention does not return; use precision bf16, or sp");
    if (p.tp_size() > 1) {
        if (blocks_)
            return invalid_field("tp", "tp needs the DiT's block weights resident in the native dtype; got " +
                                           blocks_->options().describe() +
                                           " (use residency resident, or sp instead of tp)");
        if (precision_ == DitPrecision::kFp8)
            return invalid_field("tp", "tp runs bf16, fp16 or fp32 blocks; precision fp8 keeps one rank's "
                                       "e4m3 weights (use sp, or precision bf16)");
        if (o.lora)
            return invalid_field("tp", "tp with run-time LoRA adapters is not supported (their factors are "
                                       "not split); use lora_mode merged, or sp");
        if (!p.tp_shard || p.tp_shard->size != p.tp_size() || p.tp_shard->rank != p.tp_rank() ||
            p.tp_shard->blocks.size() != weights_.blocks.size())
            return invalid_argument("tp " + std::to_string(p.tp_size()) + ": rank " +
                                    std::to_string(p.tp_rank()) +
                                    " has no weight slices for its place (DitModel::make_tp_shard)");
    }
    return ok_status();
}

Result<std::shared_ptr<DitTpShard>> DitModel::make_tp_shard(int rank, int size) const {
    H3_TRY(check_parallel_degrees(config_, 1, size));
    if (blocks_)
        return invalid_field("tp", "tp needs the DiT's block weights resident in the native dtype; got " +
                                       blocks_->options().describe());
    if (config_.ffn_dim % size != 0)
        return invalid_argument("tp " + std::to_string(size) + ": ffn_dim " +
                                std::to_string(config_.ffn_dim) + " does not split evenly");
    const int64_t I = config_.inner_dim(), Il = I / size, F = config_.ffn_dim, Fl = F / size;
    auto shard = std::make_shared<DitTpShard>();
    shard->rank = rank;
    shard->size = size;
    for (const DitBlockWeights& w : weights_.blocks) {
        std::array<Tensor, 6> m;
        auto host = [&](const Tensor& t) -> Result<Tensor> {
            H3_ASSIGN_OR_RETURN(Tensor h, t.to(Device::cpu(), ctx_.stream()));
            return h.contiguous();
        };
        H3_ASSIGN_OR_RETURN(Tensor q, host(w.to_q));
        H3_ASSIGN_OR_RETURN(Tensor k, host(w.to_k));
        H3_ASSIGN_OR_RETURN(Tensor v, host(w.to_v));
        H3_ASSIGN_OR_RETURN(Tensor out, host(w.to_out));
        H3_ASSIGN_OR_RETURN(Tensor fin, host(w.ff_in));
        H3_ASSIGN_OR_RETURN(Tensor fout, host(w.ff_out));
        const int64_t D = q.dim(1);
        H3_ASSIGN_OR_RETURN(m[0], upload(host_block(q, rank * Il, Il, 0, D)));
        H3_ASSIGN_OR_RETURN(m[1], upload(host_block(k, rank * Il, Il, 0, D)));
        H3_ASSIGN_OR_RETURN(m[2], upload(host_block(v, rank * Il, Il, 0, D)));
        H3_ASSIGN_OR_RETURN(m[3], upload(host_block(out, 0, out.dim(0), rank * Il, Il)));
        H3_ASSIGN_OR_RETURN(m[4], upload(host_rows2(fin, rank * Fl, F + rank * Fl, Fl))); // [value | gate]
        H3_ASSIGN_OR_RETURN(m[5], upload(host_block(fout, 0, fout.dim(0), rank * Fl, Fl)));
        shard->blocks.push_back(std::move(m));
    }
    return shard;
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
    if (p.sp) {
        const int64_t L = sh.local;
        H3_ASSIGN_OR_RETURN(par.send, alloc(Shape{C, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.q, alloc(Shape{C, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.k, alloc(Shape{C, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.v, alloc(Shape{C, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.o, zeros(Shape{C, X}, act_dtype())); // padding queries: zero rows
        std::vector<int32_t> pack(static_cast<size_t>(L * sp)), unpack(pack.size());
        for (int64_t j = 0; j < sp; ++j)
            for (int64_t l = 0; l < L; ++l) {
                pack[static_cast<size_t>(j * L + l)] = static_cast<int32_t>(l * sp + j);
                unpack[static_cast<size_t>(l * sp + j)] = static_cast<int32_t>(j * L + l);
            }
        H3_ASSIGN_OR_RETURN(par.pack, upload(index_tensor(pack)));
        H3_ASSIGN_OR_RETURN(par.unpack, upload(index_tensor(unpack)));
    }
    if (p.ring) { // every chunk's K/V, the fp32 accumulator (padding rows stay zero) and one partial
        H3_ASSIGN_OR_RETURN(par.k_all, alloc(Shape{sh.padded, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.v_all, alloc(Shape{sh.padded, X}, act_dtype()));
        H3_ASSIGN_OR_RETURN(par.o_acc, zeros(Shape{C, Hs, c.attention_head_dim}, DType::kF32));
        H3_ASSIGN_OR_RETURN(par.lse_acc, alloc(Shape{C, Hs}, DType::kF32));
        H3_ASSIGN_OR_RETURN(par.o_part, alloc(Shape{C, Hs, c.attention_head_dim}, DType::kF32));
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
        return ring_attention(q3, k3, v3, o3, sc);
    }
    // [L, sp, X] → [sp, L, X]: chunk j (the shard's rows, head group j) goes to rank j, which receives every
    // Ulysses rank's rows of its head group: [C, Hs, hd] in sequence order (C = all rows without a ring).
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
        H3_TRY(ring_attention(q, k, v, o, sc));
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

Status DitModel::reduce_partial(Tensor& out, DitScratch& sc) const {
    Tensor partial = sc.par.partial.slice(0, 0, out.dim(0));
    H3_TRY(sc.par.group->tp->all_reduce_sum(ctx_, partial));
    return ops::cast(ctx_, partial, out);
}

} // namespace h3::model
