// attention: o = softmax(q·kᵀ·scale)·v. Full, non-causal bf16/f16 with D in {64, 128} and as many kv heads as
// query heads runs cuDNN's fused flash attention (attention_cudnn.cpp); everything else (causal,
// grouped-query, other shapes, anything cuDNN refuses) runs the simple kernel below: online softmax (running
// max and sum), fp32 accumulation, one rounding at the store.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

#include <atomic>

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

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
                                          bool causal) {
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
}

Status run_fallback(const Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o,
                    float scale, bool causal) {
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
                heads, kv_heads, d, scale, causal);
            return check_launch("attention_fallback");
        });
    });
}

std::atomic<bool> g_warned{false};

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
    const bool half = q.dtype() == DType::kBF16 || q.dtype() == DType::kF16;
    const bool aligned = pointer_alignment(q.data()) >= 16 && pointer_alignment(k.data()) >= 16 &&
                         pointer_alignment(v.data()) >= 16 && pointer_alignment(o.data()) >= 16;
    // cuDNN writes o in q's dtype; another output dtype takes the fallback (not used by the model).
    const bool plain = !p.causal && k.dim(1) == heads; // the cuDNN graph is built for full MHA only
    if (plain && half && o.dtype() == q.dtype() && (d == 64 || d == 128) && aligned) {
        AttentionKey key{sq, sk, heads, d, static_cast<int>(q.dtype())};
        std::string why;
        auto plan = cudnn_attention_plan(ctx, key, why);
        if (plan) return cudnn_attention_run(ctx, *plan, q.data(), k.data(), v.data(), o.data(), scale);
        if (!g_warned.exchange(true))
            log_warning("attention: cuDNN fused attention unavailable (" + why +
                        "); using the slow fallback kernel");
    }
    return run_fallback(ctx, q, k, v, o, scale, p.causal);
}

} // namespace h3::ops::cuda_impl
