// The DiT over several ranks (issue #17, spec §6/§14): what one rank's forward needs to know about its group.
//   sequence parallel (sp): the packed rows are padded to a multiple of sp and split into equal contiguous
//     shards, rank r holding rows [r·S_loc, (r+1)·S_loc). Around attention an all-to-all turns the shard's
//     rows × all heads into all rows × the rank's heads (Ulysses) and back. Padding rows sit at the end of
//     the sequence, so attention over the first S gathered rows excludes them exactly; their outputs are
//     zeros. After the blocks the shards are gathered; the final norm and heads run on every rank over all
//     rows, so every rank holds the same velocities (and the same latents after its Euler step).
//   tensor parallel (tp): each rank holds heads [t·H/tp, (t+1)·H/tp) of q/k/v (column split), the matching
//     columns of to_out (row split), a 1/tp share of the FFN (fc1 value and gate halves column split, fc2 row
//     split). Per-head norms and RoPE are local. The partial to_out and fc2 products are fp32, summed by a
//     full fp32 all-reduce, then rounded once: the residual stream stays replicated on the tp ranks.
//   ring (--ring R, ring attention across the Ulysses groups, e.g. across nodes): the sequence is split over
//     sp·ring ranks (seq rank = ring_rank·sp + sp_rank, so each ring rank's Ulysses group holds one
//     contiguous chunk of P/R rows). After the Ulysses all-to-all a rank holds its chunk's q/k/v for its head
//     group; K/V of every chunk come around the ring (all_gather over the ring group: each rank receives the
//     R−1 other chunks), attention of the chunk's queries runs per key chunk returning the log-sum-exp, and
//     ops::attention_merge combines the partials exactly (fp32 accumulator, one rounding). Padding keys are
//     the tail of the last chunks: each key chunk is cut to its rows below S (a chunk of padding only is
//     skipped), padding queries are not computed (zero outputs).
//   All combine: rank = seq_rank·tp + tp_rank; Ulysses runs over the rank's H/tp heads, so sp·tp must divide
//   the heads; the ring degree only multiplies the ranks.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "model/dit/dit_config.h"
#include "model/weights/layer_source.h"
#include "ops/communicator.h"
#include "ops/gemm_fp8.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace h3::model {

class LoraSet; // model/lora/lora_set.h

// One tensor-parallel rank's slices of the 50 blocks' six projection matrices (to_q, to_k, to_v, to_out,
// ff_in, ff_out), made by DitModel::make_tp_shard in the model's weight format: column slices (rows of the
// [out, in] matrix) of q/k/v and of fc1's value and gate halves, row slices (columns) of to_out and fc2.
//   native resident   `blocks`: the slices on the model's device (fp32 / bf16 / fp16).
//   int8 or layerwise `source`: a LayerWeightSource of the slices' host masters with the model's residency
//                     options (resident int8 dequantized per block; layerwise streamed through the rank's
//                     own ring). int8 slices keep their per-row scales: a column slice takes its rows'
//                     scales, a row slice the full-row scales, so a slice dequantizes to exactly the slice
//                     of the dequantized matrix.
//   e4m3 (kFp8)       `fp8`: the e4m3 slices with their per-output-channel scales cut the same way (a row
//                     slice keeps every scale); layers kept in bf16 come from `blocks`. The row-split GEMMs
//                     round their input per row over the rank's columns (the fp8 path's per-row scales of
//                     the input it is given), so they differ from one rank within the fp8 rounding.
// A source is one user's at a time: a rank holding one owns its shard (generate_group makes one per rank).
struct DitTpShard {
    int rank = 0, size = 1;
    std::vector<std::array<Tensor, 6>> blocks;
    std::vector<std::array<ops::Fp8Weight, 6>> fp8; // kFp8 only
    std::shared_ptr<LayerWeightSource> source;      // int8 or layerwise models
};

struct DitParallel {
    ops::Communicator* sp = nullptr;            // the Ulysses group: heads split over it (null: 1 rank)
    ops::Communicator* ring = nullptr;          // the ring group: K/V chunks passed around it (null: 1 rank)
    ops::Communicator* seq = nullptr;           // every rank of the sequence split, sp·ring (null: 1 rank):
                                                // shards, the final gather, the cache probe's sums
    ops::Communicator* tp = nullptr;            // the tensor-parallel group (null: 1 rank)
    std::shared_ptr<const DitTpShard> tp_shard; // this rank's slices (tp > 1)
    // This rank's slices of the request's run-time adapters (tp > 1 with DitForwardOptions::lora): the block
    // factors cut like the weights they adapt (DitModel::make_tp_lora); the refiner's and AdaLN's are whole.
    std::shared_ptr<const LoraSet> tp_lora;
    // Ulysses overlap: the rank's heads go through the all-to-alls in this many groups, each group's
    // collectives on a communication lane (ops/comm_lane.h) while the previous group's attention runs (on
    // the CPU in call order, the same results). 0: automatic (the smallest divisor ≥ 2 of the rank's heads
    // that leaves at least 4 heads per group, else 1); 1: no overlap (every collective on the compute
    // stream). The ring keeps one group (its K/V exchange runs per chunk on the compute stream).
    int overlap_groups = 0;

    int sp_size() const { return sp ? sp->size() : 1; }
    int sp_rank() const { return sp ? sp->rank() : 0; }
    int ring_size() const { return ring ? ring->size() : 1; }
    int ring_rank() const { return ring ? ring->rank() : 0; }
    int seq_size() const { return seq ? seq->size() : 1; }
    int seq_rank() const { return seq ? seq->rank() : 0; }
    int tp_size() const { return tp ? tp->size() : 1; }
    int tp_rank() const { return tp ? tp->rank() : 0; }
    // A group is wired with the communicators of degrees > 1 only, except that bench dit --sp 1 [--ring 1]
    // wires size-1 ones to time the group's code path at world size 1: a non-null pointer is the path taken.
    bool active() const { return seq != nullptr || tp_size() > 1; }
};

// The head groups sequence_attention uses for `heads` heads per Ulysses rank under `requested`
// (DitParallel::overlap_groups): a divisor of heads; 1 with a ring.
int ulysses_overlap_groups(int64_t heads, int requested, bool ring);

// The degrees the DiT accepts: sp·tp must divide the attention heads (56 at full size); ring is any degree
// ≥ 1 (it splits the sequence, not the heads). The error names the allowed values ("--sp 3: 56 heads split
// over sp·tp = 3 ranks; allowed sp·tp: 1, 2, 4, 7, 8, 14, 28, 56").
Status check_parallel_degrees(const DitConfig& config, int sp, int tp, int ring = 1);

// Rank `rank`'s shard of S rows split over `size` sequence-parallel ranks.
struct SpShard {
    int64_t rows = 0;   // S
    int64_t padded = 0; // S rounded up to a multiple of size
    int64_t local = 0;  // padded / size
    int64_t begin = 0;  // rank · local
    int64_t valid = 0;  // rows of [begin, begin + local) below S (the rest are padding)
};
SpShard sp_shard(int64_t rows, int size, int rank);

// The cache probe's relative L1 distance across the sequence-parallel group: Σ|cur − ref| and Σ|ref| over
// each rank's valid rows, summed over the ranks (f64, rank order), then divided — every rank gets the same
// value and so makes the same decision. Without a group it is ops::rel_l1 over the first `valid` rows.
// `local` (optional) receives this rank's own distance (what it would have decided alone).
Result<double> group_rel_l1(const ops::Context& ctx, const DitParallel* parallel, int64_t valid,
                            const Tensor& cur, const Tensor& ref, double* local = nullptr);

// Per-block bytes one rank sends for a sequence of S rows (the multi-GPU note, README): Ulysses moves q, k,
// v and o, each [S/(sp·ring), inner/tp] of `bytes` per element, of which (sp−1)/sp leave the rank; the ring
// passes each rank's K and V chunk ([S/ring, inner/(sp·tp)] each) on R−1 times; tensor parallel
// all-reduces to_out's and fc2's fp32 [S/(sp·ring), hidden] partials (ring all-reduce: 2·(tp−1)/tp of the
// buffer sent per rank).
struct BlockCommBytes {
    double all_to_all = 0;
    double ring = 0;
    double all_reduce = 0;
};
BlockCommBytes block_comm_bytes(const DitConfig& config, int64_t rows, int sp, int tp, int activation_bytes,
                                int ring = 1);

} // namespace h3::model
