// Ring attention of a DiT rank (model/dit/dit_parallel.h, issue #17): the ring rank's chunk of queries
// against every chunk of keys, one partial per key chunk with its log-sum-exp, merged exactly.
//   K/V travel once around the ring as an all_gather over the ring group: each rank receives the R−1 other
//   chunks (the bytes of R−1 send/recv hops; block_comm_bytes counts them so). With the communication lane
//   (ops/comm_lane.h) the gathers run there while the rank's own chunk — its keys are local — is attended on
//   the compute stream; then the other chunks in key chunk order. Without the lane the same order on one
//   stream: own chunk, then 0..R−1 without it, so every run adds the partials in the same order.
//   Padding rows are the sequence's last P − S rows: query rows past S in this chunk are not computed (their
//   outputs stay zero), a key chunk is cut to its rows below S, and a chunk of padding only is skipped — the
//   merge then equals attention over exactly the S real keys. The accumulator starts from the own chunk
//   (a chunk with real queries holds real keys); it is fp32 and rounds once, into o.
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
    // Every chunk's K and V, in ring order: [P, Hs, hd] — gathered on the lane where there is one.
    Tensor k_all = par.k_all, v_all = par.v_all;
    ops::CommLane* lane = par.lane.get();
    const ops::Context& cc = lane ? lane->context() : ctx_;
    if (lane) H3_TRY(lane->wait_for(ctx_)); // k and v are ready, the last block's reads of k_all are queued
    H3_TRY(g.ring->all_gather(cc, k.view({C, Hs * hd}), k_all));
    H3_TRY(g.ring->all_gather(cc, v.view({C, Hs * hd}), v_all));
    if (lane) H3_TRY(lane->mark(0));
    const int64_t own = g.ring_rank(), nq = real_rows(own);
    if (nq > 0) { // the chunk's real queries are real keys too: its own chunk is never padding only
        const Tensor qa = q.slice(0, 0, nq);
        Tensor acc = par.o_acc.slice(0, 0, nq), lse = par.lse_acc.slice(0, 0, nq);
        Tensor part = par.o_part.slice(0, 0, nq), part_lse = par.lse_part.slice(0, 0, nq);
        // the own chunk first, from the local k and v (under the gathers)
        H3_TRY(
            ops::attention(ctx_, {.fp8 = fp8, .lse = &lse}, qa, k.slice(0, 0, nq), v.slice(0, 0, nq), part));
        H3_TRY(ops::cast(ctx_, part, acc));
        if (lane) H3_TRY(lane->wait_mark(ctx_, 0));
        for (int64_t b = 0; b < R; ++b) {
            const int64_t nk = real_rows(b);
            if (b == own || nk == 0) continue; // done above / padding only
            const Tensor kb = k_all.view({R * C, Hs, hd}).slice(0, b * C, b * C + nk);
            const Tensor vb = v_all.view({R * C, Hs, hd}).slice(0, b * C, b * C + nk);
            H3_TRY(ops::attention(ctx_, {.fp8 = fp8, .lse = &part_lse}, qa, kb, vb, part));
            H3_TRY(ops::attention_merge(ctx_, acc, lse, part, part_lse, acc, lse));
        }
    } else if (lane) {
        H3_TRY(lane->wait_mark(ctx_, 0)); // the compute stream still joins the lane
    }
    // One rounding into o; rows past nq copy the accumulator's zero padding rows.
    Tensor out = o.view({C, Hs, hd});
    return ops::cast(ctx_, par.o_acc, out);
}

} // namespace h3::model
