// The sm_90a attention kernels (attention_hopper.cu: bf16; attention_fp8.cu: e4m3), for head dim 128,
// q [Sq, H, 128], k/v [Sk, Hkv, 128], o [Sq, H, 128], all row-major and 16-byte aligned. Plain C++ so the
// dispatcher and the benches can call them; usable only where hopper_kernels_usable(ctx) is true.
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
    int64_t sq = 0, sk = 0, heads = 0, kv_heads = 0;
    float scale = 0.0f;  // > 0
    bool causal = false; // needs sq == sk
};

// Variants the bench compares. block_n: keys per K/V tile (128 or 176); pingpong: the two consumer
// warpgroups take turns issuing their GEMMs (one runs softmax while the other multiplies); stages: depth of
// the K/V ring (2, or 3 with block_n 128); lazy_rescale: skip a warp's O rescale when no row max moved.
struct HopperAttentionConfig {
    int block_n = 128;
    bool pingpong = true;
    int stages = 2;
    bool lazy_rescale = false;
};

// Which shapes the kernels take (head dim 128, H divisible by Hkv, causal only with Sq == Sk, sizes that
// fit the tensor maps' 32-bit coordinates).
bool hopper_attention_shape_ok(const HopperAttentionArgs& a);

// bf16 in, bf16 out, fp32 softmax and accumulation.
Status hopper_attention_bf16(const Context& ctx, const HopperAttentionArgs& a,
                             const HopperAttentionConfig& cfg = {});

// e4m3 attention on bf16 inputs (the op's fp8 mode, see ops/attention.h): a quantization pass writes e4m3
// copies with per-block power-of-two scales into `ctx`'s scratch, then the e4m3 kernel runs. Causal always
// rescales lazily.
Status hopper_attention_fp8(const Context& ctx, const HopperAttentionArgs& a, bool lazy_rescale = false);

} // namespace h3::ops::cuda_detail
