// The sm_90a attention kernels (attention_hopper.cu: bf16, head dim 64 or 128; attention_fp8.cu: e4m3, head
// dim 128, one sequence), q [Sq, H, D], k/v [Sk, Hkv, D], o [Sq, H, D], all row-major and 16-byte aligned.
// Plain C++ so the dispatcher and the benches can call them; usable only where hopper_kernels_usable(ctx) is
// true.
#pragma once

#include "core/status.h"
#include "ops/context.h"

#include <cstdint>

namespace h3::ops::cuda_detail {

struct HopperAttentionArgs {
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    void* o = nullptr;
    int64_t sq = 0, sk = 0, heads = 0, kv_heads = 0; // sq, sk: rows of q and k/v (all items together)
    float scale = 0.0f;                              // > 0
    bool causal = false;                             // needs sq == sk
    int64_t dim = 128;                               // head dim: 64 or 128 (bf16), 128 (fp8)
    // Independent sequences of equal length (ops::AttentionParams::batch): rows [b·sq/batch, (b+1)·sq/batch)
    // of q attend to rows [b·sk/batch, (b+1)·sk/batch) of k/v. bf16 only; not with causal.
    int64_t batch = 1;
    // Optional: per query row and head ln Σ_j exp(scale·q·k_j) (natural log), f32 [sq, heads] (all items'
    // rows), as ops::AttentionParams::lse — ring attention's partials. Null: not written.
    float* lse = nullptr;
};

// Variants the bench compares. block_n: keys per K/V tile (128 or 176); pingpong: the two consumer
// warpgroups take turns issuing their GEMMs (one runs softmax while the other multiplies); stages: depth of
// the K/V ring (2, or 3 with block_n 128); lazy_rescale: skip a warp's O rescale when no row max moved;
// q_register_steps: of S = Q·Kᵀ's 8 k16 steps, how many take Q's A fragments from registers (8: all, with
// one P register set; 4: the first half, two P sets).
// Head dim 64 has bn128 / bn176 pingpong and bn128 overlap; head dim 128 with a batch runs the default.
struct HopperAttentionConfig {
    int block_n = 128;
    bool pingpong = true;
    int stages = 2;
    bool lazy_rescale = false;
    int q_register_steps = 0; // 0, 4 or 8 (head dim 128, one sequence, BN 128 pingpong lazy)
};

// Which shapes the bf16 kernel takes: head dim 64 or 128, H divisible by Hkv, a batch >= 1 that divides
// both row counts, causal only with head dim 128, one sequence and Sq == Sk, sizes that fit the tensor maps'
// 32-bit coordinates. The fp8 kernel further needs head dim 128 and batch 1 (its caller checks).
bool hopper_attention_shape_ok(const HopperAttentionArgs& a);

// bf16 in, bf16 out, fp32 softmax and accumulation.
Status hopper_attention_bf16(const Context& ctx, const HopperAttentionArgs& a,
                             const HopperAttentionConfig& cfg = {});

// Variants of the e4m3 kernel the bench compares. block_n: keys per block, 128 or 192 (192: lazy rescale
// only); lazy_rescale: as above; q_in_registers: S = Q·Kᵀ reads Q from registers loaded once, not from
// shared memory (with lazy rescale). Causal runs BN 128, lazy, Q in shared memory only.
struct HopperFp8Config {
    int block_n = 128;
    bool lazy_rescale = true;
    bool q_in_registers = false;
};

// e4m3 attention on bf16 inputs (the op's fp8 mode, see ops/attention.h): a quantization pass writes e4m3
// copies with per-block power-of-two scales into `ctx`'s scratch, then the e4m3 kernel runs.
Status hopper_attention_fp8(const Context& ctx, const HopperAttentionArgs& a,
                            const HopperFp8Config& cfg = {});

} // namespace h3::ops::cuda_detail
