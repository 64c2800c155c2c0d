// Ring attention of a DiT rank (model/dit/dit_parallel.h, issue #17): the ring rank's chunk of queries
// against every chunk of keys, one partial per key chunk with its log-sum-exp, merged exactly.
//   K/V travel once around the ring as an all_gather over the ring group: each rank receives the R−1 other
//   chunks (the bytes of R−1 send/recv hops; block_comm_bytes counts them so), then the partials run in key
//   chunk order 0..R−1, so every rank and every run adds them in the same order.
//   Padding rows are the sequence's last P − S rows: query rows past S in this chunk are not computed (their
//   outputs stay zero), a key chunk is cut to its rows below S, and a chunk of padding only is skipped — the
//   merge then equals attention over exactly the S real keys. Chunk 0 always holds a real key (S ≥ 1), so
//   the accumulator starts from it; the accumulator is fp32 and rounds once, into o.
//   Each partial is written in the activation dtype (bf16 on the GPU, so the sm_90a kernels take it — bf16
//   or, with fp8, e4m3 — and return its lse); the merges mix them into the fp32 accumulator.
#include "model/dit/dit_model.h"
#include "ops/ops.h"

#include <algorithm>

namespace h3::model {

Status DitModel::ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o, DitScratch& sc,
                                bool fp8) const {
    DitScratch::Parallel& par = sc.par;
    const DitParallel& g = *par.group;
    const int64_t R = g.ring_size(), C = q.dim(0), Hs = q.dim(1), hd = q.dim(2), S = par.shard.rows;
    H3_CHECK(C * R == par.shard.padded && par.o_acc.dim(0) == C && par.o_acc.dim(1) == Hs,
             "ring attention over " << C << " rows × " << Hs << " heads, ring " << R);
    auto real_rows = [&](int64_t chunk) { return std::clamp<int64_t>(S - chunk * C, 0, C); };
    // Every chunk's K and V, in ring order: [P, Hs, hd].
    Tensor k_all = par.k_all, v_all = par.v_all;
    H3_TRY(g.ring->all_gather(ctx_, k.view({C, Hs * hd}), k_all));
    H3_TRY(g.ring->all_gather(ctx_, v.view({C, Hs * hd}), v_all));
    const int64_t nq = real_rows(g.ring_rank());
    if (nq > 0) {
        const Tensor qa = q.slice(0, 0, nq);
        Tensor acc = par.o_acc.slice(0, 0, nq), lse = par.lse_acc.slice(0, 0, nq);
        Tensor part = par.o_part.slice(0, 0, nq), part_lse = par.lse_part.slice(0, 0, nq);
        for (int64_t b = 0; b < R; ++b) {
            const int64_t nk = real_rows(b);
            if (nk == 0) continue; // padding only
            const Tensor kb = k_all.view({R * C, Hs, hd}).slice(0, b * C, b * C + nk);
            const Tensor vb = v_all.view({R * C, Hs, hd}).slice(0, b * C, b * C + nk);
            if (b == 0) {
                H3_TRY(ops::attention(ctx_, {.fp8 = fp8, .lse = &lse}, qa, kb, vb, part));
                H3_TRY(ops::cast(ctx_, part, acc));
                continue;
            }
            H3_TRY(ops::attention(ctx_, {.fp8 = fp8, .lse = &part_lse}, qa, kb, vb, part));
            H3_TRY(ops::attention_merge(ctx_, acc, lse, part, part_lse, acc, lse));
        }
    }
    // One rounding into o; rows past nq copy the accumulator's zero padding rows.
    Tensor out = o.view({C, Hs, hd});
    return ops::cast(ctx_, par.o_acc, out);
}

} // namespace h3::model
