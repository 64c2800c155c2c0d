// attention: o = softmax(q·kᵀ·scale)·v. On H100/H200 (sm_90a builds) bf16 with D = 128 — the DiT's full
// attention and the text encoder's causal grouped-query attention — and non-causal bf16 with D = 64 — the
// video VAE decoder's batched tiles — run the warp-specialized wgmma kernel (attention_hopper.cu, batched
// calls in one launch); elsewhere full, non-causal bf16/f16 with D in {64, 128} and as many kv heads as
// query heads runs cuDNN's fused flash attention (attention_cudnn.cpp); everything else (other dtypes and
// shapes, anything cuDNN refuses) runs the simple kernel below: online softmax (running max and sum), fp32
// accumulation, one rounding at the store. The log-sum-exp (AttentionParams::lse, ring attention's partials)
// comes from the sm_90a kernels (bf16 and e4m3) and the simple kernel, not from cuDNN: a call that asks for
// it runs the sm_90a kernel where it fits, else the simple one. The fp8 mode runs attention_fp8.cu (sm_90a
// only).
#include "ops/cuda/attention_hopper.h"
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/tensor_map.h"
#include "ops/provenance.h"
#include "ops/validate.h"

#include <cstdlib>

#include <atomic>

namespace h3::ops::cuda_impl {

using namespace cuda_detail;
using detail::desc;

namespace {

constexpr int kWarps = 4;      // queries per block (one per warp); they share each K/V tile
constexpr int kTile = 32;      // keys per tile: one per lane for the scores
constexpr int kMaxPerLane = 8; // output channels per lane: D <= 256

// Shared memory: q [kWarps][D], K tile [kTile][D+1] (padded: lane j reads row j, so rows must not share
// banks), V tile [kTile][D].
size_t fallback_smem(int64_t d) {
    return sizeof(float) * static_cast<size_t>(kWarps * d + kTile * (d + 1) + kTile * d);
}

template <typename T, typename TO>
__global__ void attention_fallback_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                          const T* __restrict__ v, TO* __restrict__ o, int64_t sq, int64_t sk,
                                          int64_t heads, int64_t kv_heads, int64_t d, float scale,
                                          bool causal, float* __restrict__ lse) {
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* qs = smem + warp * d;
    float* ks = smem + kWarps * d;
    float* vs = ks + kTile * (d + 1);
    const int64_t h = blockIdx.y;
    const int64_t qi = blockIdx.x * static_cast<int64_t>(kWarps) + warp;
    const bool active = qi < sq;
    const int64_t row_pitch = heads * d;       // elements between consecutive q/o positions
    const int64_t kv_pitch = kv_heads * d;     // … and k/v positions
    const int64_t hk = h / (heads / kv_heads); // grouped-query: the kv head this query head reads
    // Causal: the block's last query sees keys 0..q_last; later tiles are skipped, and within a tile each
    // query masks the keys after it (the first tile always holds key 0, so every row's max is finite).
    const int64_t q_last = blockIdx.x * static_cast<int64_t>(kWarps) + kWarps - 1;
    const int64_t k_end = causal ? (q_last + 1 < sk ? q_last + 1 : sk) : sk;

    if (active)
        for (int64_t c = lane; c < d; c += 32) qs[c] = to_f32(q[qi * row_pitch + h * d + c]);

    float m = -INFINITY, l = 0.0f;
    float acc[kMaxPerLane];
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) acc[i] = 0.0f;

    for (int64_t k0 = 0; k0 < k_end; k0 += kTile) {
        __syncthreads(); // previous tile fully consumed (and q written, on the first pass)
        const int64_t tile_n = k_end - k0 < kTile ? k_end - k0 : kTile;
        for (int64_t e = threadIdx.x; e < tile_n * d; e += blockDim.x) {
            int64_t j = e / d, c = e - j * d;
            int64_t src = (k0 + j) * kv_pitch + hk * d + c;
            ks[j * (d + 1) + c] = to_f32(k[src]);
            vs[j * d + c] = to_f32(v[src]);
        }
        __syncthreads();
        if (!active) continue;
        float s = -INFINITY;
        if (lane < tile_n && (!causal || k0 + lane <= qi)) {
            float dot = 0.0f;
            const float* kr = ks + lane * (d + 1);
            for (int64_t c = 0; c < d; ++c) dot = fmaf(qs[c], kr[c], dot);
            s = dot * scale;
        }
        const float m_new = fmaxf(m, warp_max(s));
        const float corr = __expf(m - m_new); // m = -inf on the first tile: corr = 0, acc is still 0
        const float p = s == -INFINITY ? 0.0f : __expf(s - m_new);
        l = l * corr + warp_sum(p);
        m = m_new;
#pragma unroll
        for (int i = 0; i < kMaxPerLane; ++i) acc[i] *= corr;
        for (int j = 0; j < tile_n; ++j) {
            const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
            for (int i = 0; i < kMaxPerLane; ++i) {
                const int64_t c = lane + 32 * i;
                if (c < d) acc[i] = fmaf(pj, vs[j * d + c], acc[i]);
            }
        }
    }
    if (!active) return;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
        const int64_t c = lane + 32 * i;
        if (c < d) o[qi * row_pitch + h * d + c] = from_f32<TO>(acc[i] * inv);
    }
    // ln Σ exp(s) = m + ln l (the row's running max and sum); no key: −inf.
    if (lse && lane == 0) lse[qi * heads + h] = l > 0.0f ? m + logf(l) : -INFINITY;
}

Status run_fallback(const Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o,
                    float scale, bool causal, Tensor* lse) {
    const int64_t sq = q.dim(0), heads = q.dim(1), d = q.dim(2), sk = k.dim(0), kv_heads = k.dim(1);
    if (d > 32 * kMaxPerLane) return unimplemented("CUDA attention fallback: head dim > 256");
    const size_t smem = fallback_smem(d);
    // The output dtype may differ from q/k/v (one rounding at the store, into o's own type).
    return dispatch_float(q.dtype(), [&](auto tq) {
        using T = typename decltype(tq)::type;
        return dispatch_float(o.dtype(), [&](auto to) {
            using TO = typename decltype(to)::type;
            H3_CUDA_TRY(cudaFuncSetAttribute(attention_fallback_kernel<T, TO>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)),
                        "cudaFuncSetAttribute(attention)");
            dim3 grid(static_cast<unsigned>((sq + kWarps - 1) / kWarps), static_cast<unsigned>(heads));
            attention_fallback_kernel<T, TO><<<grid, kWarps * 32, smem, stream_of(ctx)>>>(
                q.data_as<const T>(), k.data_as<const T>(), v.data_as<const T>(), o.data_as<TO>(), sq, sk,
                heads, kv_heads, d, scale, causal, lse ? lse->data_as<float>() : nullptr);
            return check_launch("attention_fallback");
        });
    });
}

// The Hopper kernel's default configuration (docs/kernels/attention_notes.md): BN 128, pingpong, lazy O
// rescaling (exact: a warp skips the rescale only when no row max moved; over rescaling every block −0.5 to
// +3.6 %, mean +1.5 %, in five multi-round benches on H100s at S = 38 k and 104 k) and Q's fragments in
// registers for S = Q·Kᵀ (ahead of Q from shared memory in all eight comparisons, +1.3 to +3.5 % but for one
// +12 % outlier, H100s at 38 k and 104 k). Lazy rescaling and Q in registers exist for head dim 128's single
// sequence (causal always rescales lazily, with Q in shared memory); head dim 64 and batches ignore the
// flags.
constexpr HopperAttentionConfig kHopperDefault{
    .block_n = 128, .pingpong = true, .lazy_rescale = true, .q_register_steps = 8};
// The e4m3 kernel's default: lazy rescaling (+4 to +7 % over rescaling every block) and Q in registers (+5.5
// to +8.5 % over Q from shared memory in eight of nine comparisons, −1.5 % in one; H100s, S = 38 k and
// 104 k); causal runs BN 128 lazy with Q in shared memory.
constexpr HopperFp8Config kFp8Default{.block_n = 128, .lazy_rescale = true, .q_in_registers = true};

// `batch`: the items of a batched call (q/o rows batch·Sq, k/v rows batch·Sk); `lse`: optional [rows, H] f32.
HopperAttentionArgs hopper_args(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o, float scale,
                                bool causal, int64_t batch = 1, Tensor* lse = nullptr) {
    return {.q = q.data(),
            .k = k.data(),
            .v = v.data(),
            .o = o.data(),
            .sq = q.dim(0),
            .sk = k.dim(0),
            .heads = q.dim(1),
            .kv_heads = k.dim(1),
            .scale = scale,
            .causal = causal,
            .dim = q.dim(2),
            .batch = batch,
            .lse = lse ? lse->data_as<float>() : nullptr};
}

// The bf16 kernel: head dim 64 (non-causal) or 128, bf16 in and out (hopper_attention_shape_ok has the rest).
bool hopper_fits(const Context& ctx, const Tensor& q, const Tensor& o, const HopperAttentionArgs& a) {
    return hopper_kernels_usable(ctx) && q.dtype() == DType::kBF16 && o.dtype() == DType::kBF16 &&
           hopper_attention_shape_ok(a);
}

// The fp8 kernel: head dim 128, one sequence per call.
bool hopper_fp8_fits(const Context& ctx, const Tensor& q, const Tensor& o, const HopperAttentionArgs& a) {
    return hopper_fits(ctx, q, o, a) && a.dim == 128 && a.batch == 1;
}

// cuDNN's graph covers full MHA with bf16/f16 in and the same dtype out, D in {64, 128}, aligned pointers.
bool cudnn_fits(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                const Tensor& o) {
    const bool half = q.dtype() == DType::kBF16 || q.dtype() == DType::kF16;
    const bool aligned = pointer_alignment(q.data()) >= 16 && pointer_alignment(k.data()) >= 16 &&
                         pointer_alignment(v.data()) >= 16 && pointer_alignment(o.data()) >= 16;
    const int64_t d = q.dim(2);
    return !p.causal && k.dim(1) == q.dim(1) && half && o.dtype() == q.dtype() && (d == 64 || d == 128) &&
           aligned;
}

AttentionKey cudnn_key(const Tensor& q, const Tensor& k, int64_t batch = 1) {
    return AttentionKey{
        q.dim(0) / batch, k.dim(0) / batch, q.dim(1), q.dim(2), static_cast<int>(q.dtype()), batch};
}

} // namespace

Status attention(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& o) {
    const int64_t sq = q.dim(0), heads = q.dim(1), d = q.dim(2), sk = k.dim(0);
    if (sq == 0 || heads == 0 || d == 0) return ok_status();
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / sqrtf(static_cast<float>(d));
    if (sk == 0) { // softmax over no keys: define the output as zeros rather than NaN
        H3_CUDA_TRY(cudaMemsetAsync(o.data(), 0, o.nbytes(), stream_of(ctx)), "cudaMemsetAsync");
        return ok_status();
    }
    const HopperAttentionArgs ha = hopper_args(q, k, v, o, scale, p.causal, 1, p.lse);
    if (p.fp8) {
        if (d != 128)
            return unimplemented("attention: the CUDA fp8 mode needs head dim 128, q is " + desc(q));
        note_impl(OpFamily::kDenseAttention, "sm90a-wgmma-e4m3");
        return hopper_attention_fp8(ctx, ha, p.causal ? HopperFp8Config{} : kFp8Default);
    }
    // cuDNN's graph does not return the log-sum-exp (ring attention's partials); the sm_90a kernels and the
    // fallback do.
    const bool hopper = hopper_fits(ctx, q, o, ha);
    const bool cudnn = !p.lse && cudnn_fits(p, q, k, v, o);
    switch (p.impl) {
    case AttentionImpl::kHopper:
        if (!hopper)
            return unimplemented("attention: the sm_90a kernel cannot run this call (" + desc(q) + ")");
        note_impl(OpFamily::kDenseAttention, "sm90a-wgmma-bf16");
        return hopper_attention_bf16(ctx, ha, kHopperDefault);
    case AttentionImpl::kCudnn: {
        if (!cudnn)
            return unimplemented("attention: cuDNN's graph does not cover this call (" + desc(q) +
                                 (p.lse ? ": lse is asked)" : ")"));
        std::string why;
        auto plan = cudnn_attention_plan(ctx, cudnn_key(q, k), why);
        if (!plan) return unimplemented("attention: cuDNN offers no fused attention plan: " + why);
        note_impl(OpFamily::kDenseAttention, "cudnn");
        return cudnn_attention_run(ctx, *plan, q.data(), k.data(), v.data(), o.data(), scale);
    }
    case AttentionImpl::kFallback:
        note_impl(OpFamily::kDenseAttention, "fallback");
        return run_fallback(ctx, q, k, v, o, scale, p.causal, p.lse);
    case AttentionImpl::kAuto:
        break;
    }
    if (hopper) {
        note_impl(OpFamily::kDenseAttention, "sm90a-wgmma-bf16");
        return hopper_attention_bf16(ctx, ha, kHopperDefault);
    }
    if (cudnn) {
        std::string why;
        auto plan = cudnn_attention_plan(ctx, cudnn_key(q, k), why);
        if (plan) {
            note_impl(OpFamily::kDenseAttention, "cudnn");
            return cudnn_attention_run(ctx, *plan, q.data(), k.data(), v.data(), o.data(), scale);
        }
        if (stream_recording(ctx)) return invalid_argument("attention: " + why); // not the fallback, recorded
        // one warning per job (ops/provenance.h)
        note_fallback(OpFamily::kDenseAttention, "cudnn", "fallback",
                      "cuDNN fused attention unavailable (" + why + "); the slow fallback kernel runs");
        return run_fallback(ctx, q, k, v, o, scale, p.causal, p.lse);
    }
    note_impl(OpFamily::kDenseAttention, "fallback");
    return run_fallback(ctx, q, k, v, o, scale, p.causal, p.lse);
}

// The batch in one call: the sm_90a kernel (grid.z = item) where it takes the call, else cuDNN's batched
// plan (not with lse); `ran` false leaves the call to the caller's item-by-item loop (fp8, causal, other
// dtypes, lse where the sm_90a kernel does not fit, and a forced implementation that has no batched form).
Status attention_batched(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                         const Tensor& v, Tensor& o, bool& ran) {
    ran = false;
    if (p.fp8 || q.numel() == 0 || k.dim(0) == 0) return ok_status();
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / sqrtf(static_cast<float>(q.dim(2)));
    if (p.impl == AttentionImpl::kAuto || p.impl == AttentionImpl::kHopper) {
        const HopperAttentionArgs ha = hopper_args(q, k, v, o, scale, p.causal, p.batch, p.lse);
        if (hopper_fits(ctx, q, o, ha)) {
            note_impl(OpFamily::kDenseAttention, "sm90a-wgmma-bf16");
            H3_TRY(hopper_attention_bf16(ctx, ha, kHopperDefault));
            ran = true;
            return ok_status();
        }
    }
    const bool wants = !p.lse && (p.impl == AttentionImpl::kAuto || p.impl == AttentionImpl::kCudnn);
    if (!wants) return ok_status();
    if (!cudnn_fits(p, q, k, v, o)) {
        if (p.impl == AttentionImpl::kCudnn)
            return unimplemented("attention: cuDNN's graph does not cover this call (" + desc(q) + ")");
        return ok_status();
    }
    std::string why;
    auto plan = cudnn_attention_plan(ctx, cudnn_key(q, k, p.batch), why);
    if (!plan) {
        if (p.impl == AttentionImpl::kCudnn || stream_recording(ctx))
            return unimplemented("attention: cuDNN offers no batched fused attention plan: " + why);
        return ok_status();
    }
    note_impl(OpFamily::kDenseAttention, "cudnn");
    H3_TRY(cudnn_attention_run(ctx, *plan, q.data(), k.data(), v.data(), o.data(), scale));
    ran = true;
    return ok_status();
}

std::vector<std::string> attention_candidates(const Context& ctx, const AttentionParams& p, const Tensor& q,
                                              const Tensor& k, const Tensor& v, const Tensor& o) {
    std::vector<std::string> names;
    const float scale = p.scale > 0.0f ? p.scale : 1.0f;
    Tensor out = o;
    const HopperAttentionArgs ha = hopper_args(q, k, v, out, scale, p.causal, p.batch, p.lse);
    if (p.fp8) {
        if (hopper_fp8_fits(ctx, q, o, ha)) {
            if (p.causal) {
                names.push_back("hopper fp8 lazy"); // causal's one instantiation
            } else {
                for (const char* n : {"lazy qregs", "lazy", "bn192 lazy", "bn192 lazy qregs", "eager"})
                    names.push_back(std::string("hopper fp8 ") + n); // the default first
            }
        }
        return names;
    }
    if (hopper_fits(ctx, q, o, ha)) {
        if (p.causal) {
            names.push_back("hopper bn128 pingpong lazy");
        } else if (ha.dim == 64) { // the head dim 64 instantiations (batched or not)
            for (const char* n : {"bn128 pingpong", "bn176 pingpong", "bn128 overlap"})
                names.push_back(std::string("hopper ") + n);
        } else if (p.batch > 1) { // head dim 128 runs its default for a batch
            names.push_back("hopper bn128 pingpong");
        } else {
            for (const char* n :
                 {"bn128 pingpong lazy qregs", "bn128 pingpong lazy qregs-half", "bn128 pingpong lazy",
                  "bn128 pingpong", "bn128 pingpong s3", "bn176 pingpong", "bn128 overlap"})
                names.push_back(std::string("hopper ") + n);
        }
    }
    if (!p.lse && cudnn_fits(p, q, k, v, o)) { // cuDNN's graph does not return the log-sum-exp
        std::string why;
        for (const auto& plan : cudnn_attention_candidates(ctx, cudnn_key(q, k, p.batch), why))
            names.push_back("cudnn " + plan->config);
    }
    names.push_back("fallback");
    return names;
}

// p.batch > 1: the hopper and cudnn candidates run the batch in one call; ops::attention_candidate runs the
// fallback item by item.
Status attention_candidate(const Context& ctx, const std::string& name, const AttentionParams& p,
                           const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o) {
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / sqrtf(static_cast<float>(q.dim(2)));
    const HopperAttentionArgs ha = hopper_args(q, k, v, o, scale, p.causal, p.batch, p.lse);
    if (name == "fallback") {
        if (p.batch != 1)
            return invalid_argument("attention_candidate: the fallback kernel takes one sequence per call, "
                                    "not batch " +
                                    std::to_string(p.batch));
        return run_fallback(ctx, q, k, v, o, scale, p.causal, p.lse);
    }
    if (name.rfind("hopper fp8 ", 0) == 0) {
        const std::string v = name.substr(11);
        HopperFp8Config cfg;
        cfg.block_n = v.rfind("bn192", 0) == 0 ? 192 : 128;
        cfg.lazy_rescale = v != "eager";
        cfg.q_in_registers = v.find("qregs") != std::string::npos;
        const bool known =
            v == "lazy" || v == "lazy qregs" || v == "bn192 lazy" || v == "bn192 lazy qregs" || v == "eager";
        if (!known) return invalid_argument("attention_candidate: no candidate '" + name + "'");
        if (ha.dim != 128 || ha.batch != 1)
            return unimplemented("attention_candidate: '" + name +
                                 "' takes head dim 128 and one sequence per call; q is " + desc(q) +
                                 ", batch " + std::to_string(p.batch));
        if (p.causal && v != "lazy")
            return unimplemented("attention_candidate: '" + name + "' has no causal instantiation");
        return hopper_attention_fp8(ctx, ha, cfg);
    }
    if (name.rfind("hopper bn", 0) == 0) {
        HopperAttentionConfig cfg;
        cfg.block_n = std::atoi(name.c_str() + 9);
        cfg.pingpong = name.find("pingpong") != std::string::npos;
        cfg.stages = name.find(" s3") != std::string::npos ? 3 : 2;
        cfg.lazy_rescale = name.find("lazy") != std::string::npos;
        cfg.q_register_steps = name.find("qregs-half") != std::string::npos ? 4
                               : name.find("qregs") != std::string::npos    ? 8
                                                                            : 0;
        if (cfg.q_register_steps > 0 && !(ha.dim == 128 && ha.batch == 1 && !p.causal && cfg.block_n == 128 &&
                                          cfg.pingpong && cfg.stages == 2 && cfg.lazy_rescale))
            return unimplemented("attention_candidate: '" + name +
                                 "' exists for head dim 128, one sequence, not causal");
        // The instantiations attention_candidates offers beyond head dim 128's single sequence.
        const bool d64_variant = cfg.stages == 2 && !cfg.lazy_rescale &&
                                 (cfg.block_n == 128 || (cfg.block_n == 176 && cfg.pingpong));
        const bool default_cfg = cfg.block_n == 128 && cfg.pingpong && cfg.stages == 2 && !cfg.lazy_rescale;
        if ((ha.dim == 64 && !d64_variant) || (ha.dim == 128 && ha.batch > 1 && !default_cfg))
            return unimplemented("attention_candidate: no '" + name + "' instantiation for head dim " +
                                 std::to_string(ha.dim) + ", batch " + std::to_string(ha.batch));
        return hopper_attention_bf16(ctx, ha, cfg);
    }
    if (name.rfind("cudnn ", 0) == 0) {
        if (p.lse) return unimplemented("attention_candidate: '" + name + "' does not return lse");
        std::string why;
        for (const auto& plan : cudnn_attention_candidates(ctx, cudnn_key(q, k, p.batch), why))
            if ("cudnn " + plan->config == name)
                return cudnn_attention_run(ctx, *plan, q.data(), k.data(), v.data(), o.data(), scale);
    }
    return invalid_argument("attention_candidate: no candidate '" + name + "' for this call");
}

} // namespace h3::ops::cuda_impl
