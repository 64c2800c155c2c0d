// Attention. See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

#include <string>
#include <vector>

namespace h3::ops {

// o = softmax(q·kᵀ·scale + mask) v; softmax in fp32.
// q [Sq,H,D], k/v [Sk,Hkv,D], o [Sq,H,D]; q/k/v same dtype (f32, bf16, f16). Grouped-query attention when
// Hkv < H (H divisible by Hkv): query head h reads kv head h / (H/Hkv). `causal` (needs Sq == Sk): query i
// sees keys 0..i only. The DiT uses the default: full, non-causal, Hkv == H.
//
// Implementations on CUDA (the CPU always runs its reference): kAuto picks the fastest that can run the call
// (the sm_90a kernel on H100/H200 for bf16 with D = 128, or D = 64 non-causal, else cuDNN's fused attention
// for full MHA, else a simple kernel); the others force one and return kUnimplemented where it cannot run
// (tests and benches).
enum class AttentionImpl { kAuto, kHopper, kCudnn, kFallback };
//
// fp8 (opt-in, lossy; bf16 q/k/v and o, head dim 128 on CUDA, sm_90a): q is rounded to e4m3 per head in
// blocks of 128 rows, k and v per head (one scale over all keys), each scaled by the power of two that maps
// its max |x| into [224, 448] (ops/fp8_scale.h). Scores are q8·k8 times the two scales and `scale`, in
// fp32; the online softmax runs per 128-key block against the running row max; P is rounded to e4m3 as
// 2^(x − m + 8) (the output is scaled back by v_scale / 256); row sums use the unrounded P; P·V accumulates
// in fp32. The CPU reference simulates exactly this (e4m3 rounding, the same blocks and scales), so it
// states the bound of the CUDA kernel against it.
//
// lse (optional output, ring attention's partials — ops/attention_merge.h): [Sq, H] f32, per query row and
// head ln Σ_j exp(scale·q·k_j) over the keys the row sees (natural log, of the scaled scores), so two
// results over disjoint key sets merge exactly. With fp8: of the quantized scores, and the sum of the
// unrounded P the output is divided by (the CPU reference writes the same). On CUDA the sm_90a kernels (bf16,
// and e4m3 for fp8) and the fallback kernel return it, cuDNN does not: kAuto runs the sm_90a kernel where it
// fits, else the fallback; kCudnn returns kUnimplemented.
//
// batch (> 1: independent sequences of equal length in one call, e.g. the video VAE decoder's tiles): q and o
// are [batch·Sq, H, D], k/v [batch·Sk, Hkv, D] (lse [batch·Sq, H]); rows [b·Sq, (b+1)·Sq) of q attend to
// rows [b·Sk, (b+1)·Sk) of k/v only. On CUDA the sm_90a kernel (where it takes the call: bf16, D = 64 or
// 128, non-causal) runs the batch as one launch, else cuDNN as one fused call (its batch dimension); every
// other implementation, and the CPU, runs the items one after another — the same result either way.
struct AttentionParams {
    float scale = 0.0f; // 0 => 1/sqrt(D)
    bool causal = false;
    bool fp8 = false;
    AttentionImpl impl = AttentionImpl::kAuto;
    Tensor* lse = nullptr;
    int64_t batch = 1;
};
Status attention(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& o);

// For benches: every implementation and configuration that can run this call on `ctx` ("hopper bn128
// pingpong", "cudnn sdpa_fwd engine 8, knobs ...", "fallback", ...), the default first; and one run of a
// named candidate (p.impl is ignored). CPU: just "cpu". With p.batch > 1 the hopper and cudnn candidates run
// the batch in one call, "fallback" (and the CPU) item by item.
std::vector<std::string> attention_candidates(const Context& ctx, const AttentionParams& p, const Tensor& q,
                                              const Tensor& k, const Tensor& v, const Tensor& o);
Status attention_candidate(const Context& ctx, const std::string& name, const AttentionParams& p,
                           const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o);

} // namespace h3::ops
