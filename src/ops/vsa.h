// Video sparse attention for the H3 packed sequence (FastH3's VSA, spec §12; FastVideo
// video_sparse_attn_h3.py is the reference). See ops.h for the conventions shared by all ops.
//
// The packed rows are [prefix segments … | generated video (T, H, W tokens, frame-major)]. Tiles of 64 slots:
// each prefix segment is cut into consecutive 64-row tiles that never cross a segment boundary (the last one
// may be short), then the video grid into (4, 4, 4) cubes in (t, h, w) tile order, edge cubes partial (their
// valid size is the product of the clipped extents). Slot s of a tile holds the s-th row of the tile in that
// order; slots past the tile's size are padding (never read as keys, never written as queries).
//
// One layer: pool q, k (and v for the compression branch) per tile in fp32 (vsa_pool), score the tiles
// Sc = q̄·k̄ᵀ/sqrt(D) (vsa_tile_scores), pick each video query tile's key tiles (vsa_select), attend with an
// exact softmax over the union of the picked tiles' rows (block_sparse_attention: prefix query tiles attend
// to every tile), then the compression branch out += G ⊙ softmax(Sc)·v̄ of the row's tile
// (vsa_compress_tiles + vsa_gate_add, or the gate add fused into block_sparse_attention: gate_add).
#pragma once

#include "core/tensor.h"
#include "ops/context.h"
#include "ops/gemm_fp8.h"

#include <cstdint>
#include <vector>

namespace h3::ops {

inline constexpr int kVsaTileRows = 64;       // slots per tile (the kernel's block size)
inline constexpr int kVsaCube[3] = {4, 4, 4}; // video tile extent in (t, h, w)

// Where the tiles come from: the prefix segment sizes in packed order (zero sizes are skipped) and the
// generated video's token grid, whose rows follow the prefix.
struct VsaGeometry {
    std::vector<int64_t> prefix_segments;
    int64_t grid_t = 0, grid_h = 0, grid_w = 0;
};

// The tile map of one request (host side; computed once from the layout).
struct VsaTileMap {
    int64_t rows = 0; // packed rows: Σ prefix + grid_t·grid_h·grid_w
    int64_t num_prefix_tiles = 0, num_video_tiles = 0;
    std::vector<int32_t> tile_sizes; // [tiles] valid slots, 1..64
    std::vector<int32_t> slot_rows;  // [tiles·64] packed row of each slot, −1 for padding
    std::vector<int32_t> row_tiles;  // [rows] tile of each packed row
    int64_t num_tiles() const { return num_prefix_tiles + num_video_tiles; }
};
// Errors name the geometry when a segment is negative or the grid is empty.
Result<VsaTileMap> build_vsa_tile_map(const VsaGeometry& geometry);

// The tile map on the op device, as the ops read it (i32 tensors).
struct VsaTiles {
    Tensor slot_rows;  // [tiles·64]
    Tensor tile_sizes; // [tiles]
    Tensor row_tiles;  // [rows]
    int64_t rows = 0, num_prefix_tiles = 0, num_video_tiles = 0;
    int64_t num_tiles() const { return num_prefix_tiles + num_video_tiles; }
};
Result<VsaTiles> upload_vsa_tiles(const Context& ctx, const VsaTileMap& map);

// Video key tiles kept per video query tile: clamp(ceil((1 − sparsity)·n_video), 1, n_video), the double
// arithmetic of FastVideo's compute_topk. sparsity must lie in [0, 1).
int64_t vsa_keep(double sparsity, int64_t num_video_tiles);

// out[h, t, :] = (Σ over tile t's valid slots, in slot order, of x[row, h, :]) / size(t), summed in fp32.
// x [rows, H, D] f32/bf16/f16; out [H, tiles, D] f32.
Status vsa_pool(const Context& ctx, const VsaTiles& tiles, const Tensor& x, Tensor& out);

// vsa_pool of a layer's q, k and (for the compression branch) v in one launch, the same bits as one call
// each: out[0] = pool(q), out[1] = pool(k), out[2] = pool(v); an undefined v pools q and k only. q, k, v
// [rows, H, D] of one dtype; out [2 or 3, H, tiles, D] f32.
Status vsa_pool_qkv(const Context& ctx, const VsaTiles& tiles, const Tensor& q, const Tensor& k,
                    const Tensor& v, Tensor& out);

// scores[h, i, j] = (Σ_d q̄[h, i, d]·k̄[h, j, d]) / sqrt(D) in fp32, the sum in d order as one chain of
// correctly rounded fused multiply-adds (acc = fma(q̄, k̄, acc); std::fma on the CPU, __fmaf_rn on CUDA), then
// one division: the CUDA and CPU results are identical.
// q̄, k̄ [H, tiles, D] f32; scores [H, tiles, tiles] f32.
Status vsa_tile_scores(const Context& ctx, const Tensor& q_pooled, const Tensor& k_pooled, Tensor& scores);

// Per head and video query tile i (query tile P + i, P = num_prefix_tiles), the key tiles it attends to,
// ascending: `exempt` — every prefix tile 0..P−1, then the `keep` video tiles of highest score; `compete` —
// the keep + P tiles of highest score over all tiles. Ties go to the lower tile index (NaN scores rank as
// −inf). lists [H, n_video, width] i32 with width = vsa_select_width(...).
struct VsaSelectParams {
    int64_t keep = 1;
    bool compete = false;
};
int64_t vsa_select_width(const VsaSelectParams& p, int64_t num_prefix_tiles, int64_t num_tiles);
Status vsa_select(const Context& ctx, const VsaSelectParams& p, const VsaTiles& tiles, const Tensor& scores,
                  Tensor& lists);

// o[r, h, :] += gate[r, h, :] ⊙ oc[h, tile(r), :]. With round_intermediate (the bf16 reference's rounding:
// FastVideo casts oc to o's dtype, then the product and the sum are rounded each) oc and the product are
// rounded to o's dtype. gate, o [rows, H, D] float; oc [H, tiles, D] f32.
struct VsaGateAddParams {
    bool round_intermediate = false;
};
Status vsa_gate_add(const Context& ctx, const VsaGateAddParams& p, const VsaTiles& tiles, const Tensor& oc,
                    const Tensor& gate, Tensor& o);

// vsa_gate_add(p, tiles, oc, gate, o) into a copy of o, then quantize_rows_fp8 of that copy as [rows, H·D]:
// the e4m3 rows (and row scales) of the gated attention output for the out projection's e4m3 GEMM, in the
// same bytes as the two ops, with o left as it was (ops/fp8_fused.h's pattern; on CUDA one pass per row, the
// bf16 row never stored). o, gate [rows, H, D] bf16; oc [H, tiles, D] f32; out.data [rows, H·D] f8_e4m3,
// out.scale [rows] f32 (caller-allocated on ctx's device). Rows without a tile (a device row_tiles entry
// outside the map) quantize o's row as it is, as vsa_gate_add leaves it.
Status vsa_gate_add_fp8(const Context& ctx, const VsaGateAddParams& p, const VsaTiles& tiles,
                        const Tensor& oc, const Tensor& gate, const Tensor& o, Fp8Activation& out);

// The compression branch's gate add as a part of block_sparse_attention (its params' gate_add): the attention
// output, rounded to o's dtype as it is stored, then vsa_gate_add(params, tiles, *oc, *gate, o) — the same
// bytes as the two ops one after the other, on every implementation. The wgmma kernels apply it in their
// epilogue (no second pass over o; bf16 gate, oc and gate 16-byte aligned, a tile map from
// build_vsa_tile_map); every other implementation runs the attention, then vsa_gate_add. Both pointers null:
// none; oc [H, tiles, D] f32, gate [rows, H, D] float (the act dtype), neither sharing memory with o.
struct VsaFusedGateAdd {
    const Tensor* oc = nullptr;
    const Tensor* gate = nullptr;
    VsaGateAddParams params{};
};

// o = softmax(q·kᵀ·scale)·v per head with each query row restricted to the rows of its tile's key tiles:
// prefix query tiles see every tile, video query tile P + i sees lists[h, i, :]. Exact softmax in fp32 over
// the union (the CPU reference walks the keys in packed row order, so with every tile listed it is the dense
// attention op bit for bit). q, k, v, o [rows, H, D] one dtype; lists [H, n_video, width] i32 (ascending,
// distinct, < tiles); scale 0 ⇒ 1/sqrt(D).
//
// Implementations on CUDA (the CPU always runs its reference): kAuto picks the fastest that can run the call
// — on H100/H200 (sm_90a builds) with bf16 and D = 128 the wgmma kernel (vsa_attention_hopper.cu), else for
// bf16/f16 with D = 64 or 128 on sm_80+ the mma.sync kernel, else a scalar one; kHopper and kMma force one
// and return kUnimplemented where it cannot run (tests and benches compare them).
//
// fp8 (opt-in, lossy; bf16 q/k/v and o; on CUDA head dim 128 and sm_90a, the wgmma kernel only): q is rounded
// to e4m3 per head and query tile (its valid slots), k and v per head (one scale over all rows), each scaled
// by the power of two that maps its max |x| into [224, 448] (ops/fp8_scale.h); scores are q8·k8 times the
// scales and `scale` in fp32; the online softmax runs per 64-key tile, in list order (prefix query tiles:
// tile order), against the running row max; P is rounded to e4m3 as 2^(x − m + 8), the output scaled back by
// v_scale / 256; row sums use the unrounded P; P·V accumulates in fp32. The CPU reference simulates exactly
// this (cpu/vsa_fp8.cpp), so it states the kernel's bound against it.
enum class BlockSparseImpl { kAuto, kHopper, kMma };
struct BlockSparseAttentionParams {
    float scale = 0.0f;
    BlockSparseImpl impl = BlockSparseImpl::kAuto;
    bool fp8 = false;
    // The wgmma kernel's K/V ring depth (kHopper, or kAuto where it picks that kernel): 0 for its
    // default (2 stages: 80 KB of shared memory per CTA bf16, 40 KB e4m3, two CTAs per SM), or 2, 3, 4 (bf16
    // 112 / 144 KB, e4m3 56 / 72 KB; bf16 with 4 fits one CTA per SM). Same arithmetic, so the same output;
    // other implementations ignore it.
    int hopper_stages = 0;
    // The compression branch's gate add after the attention (see VsaFusedGateAdd); none by default.
    VsaFusedGateAdd gate_add{};
};
Status block_sparse_attention(const Context& ctx, const BlockSparseAttentionParams& p, const VsaTiles& tiles,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lists,
                              Tensor& o);

// The compression branch's per-tile output: oc[h, i, :] = Σ_j softmax_j(scores[h, i, :])·v̄[h, j, :] (fp32;
// softmax with max subtraction, over every tile). scores [H, tiles, tiles], v̄ [H, tiles, D], oc [H, tiles, D]
// all f32.
Status vsa_compress_tiles(const Context& ctx, const Tensor& scores, const Tensor& v_pooled, Tensor& oc);

} // namespace h3::ops
