// The sm_90a block-sparse attention kernels (vsa_attention_hopper.cu): ops::block_sparse_attention's bf16
// path and its fp8 mode on H100/H200 for head dim 128. Plain C++ so the dispatcher (vsa_attention.cu) can
// call it; usable only where hopper_kernels_usable(ctx) is true.
#pragma once

#include "core/status.h"
#include "ops/context.h"

#include <cstdint>

namespace h3::ops::cuda_detail {

// q, k, v, o [rows, heads, dim] bf16, 16-byte aligned; the tile map and lists as ops::block_sparse_attention
// takes them (device i32 arrays: slot_rows [tiles·64], tile_sizes [tiles], lists [heads, tiles − prefix,
// width]). scale > 0.
struct HopperBlockSparseArgs {
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    void* o = nullptr;
    const int32_t* slot_rows = nullptr;
    const int32_t* tile_sizes = nullptr;
    const int32_t* lists = nullptr;
    int64_t rows = 0, heads = 0, dim = 0, tiles = 0, prefix = 0, width = 0;
    float scale = 0.0f;
    // K/V ring depth (0: the default, 2); 2, 3 or 4.
    int stages = 0;
    // The fused gate add (ops::VsaFusedGateAdd), null gate for none: each stored output row r of query tile t
    // becomes bf16(o + round(round(oc[h, t, :])·gate[r, h, :])) as ops::vsa_gate_add computes it, o the
    // attention output rounded to bf16. gate [rows, heads, 128] bf16, oc [heads, tiles, 128] f32, both
    // 16-byte aligned; the tile map's rows of tile t must be tile t's (row_tiles), as build_vsa_tile_map
    // makes them.
    const void* gate = nullptr;
    const float* gate_oc = nullptr;
    bool gate_round = false; // VsaGateAddParams::round_intermediate
};

// kUnimplemented where the kernel cannot run (no sm_90a build or device, head dim other than 128).
Status hopper_block_sparse_bf16(const Context& ctx, const HopperBlockSparseArgs& a);
// The fp8 mode (ops/vsa.h: BlockSparseAttentionParams::fp8): bf16 in and out, e4m3 tensor cores.
Status hopper_block_sparse_fp8(const Context& ctx, const HopperBlockSparseArgs& a);

} // namespace h3::ops::cuda_detail
