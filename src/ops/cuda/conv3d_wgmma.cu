// conv3d's implicit GEMM on Hopper warpgroup MMAs (sm_90a), over the operands conv3d_f16_launch prepares
// (see conv3d_wgmma.h).
//
// D[co, n] = Σ_k W[co, k] · X[n, k] with M = Cout, N = the Ho·Wo voxels of one output frame (grid.z = B·To,
// so the causal tap skip is block-uniform) and K = Cp channels × the taps on real frames. A CTA computes 128
// (Cout) × 256 (voxels) with two warpgroups of 64 × 256 (wgmma m64n256k16, fp16 in, fp32 accumulators, A and
// B both K-major from shared memory). Each K step is one 64-channel run of one tap — 128 bytes per operand
// row — so every row is eight 16-byte cp.async chunks stored in the 128-byte swizzle wgmma reads (chunk c of
// row r at r·128 + ((c ^ r % 8) · 16), 1024-byte atoms). The K order is channel-run major, taps inner (kw
// fastest): consecutive steps of one run read B rows shifted by one voxel (the kw taps), which the
// L1-allocating cp.async.ca loads of B serve mostly from L1. A goes through L2 only (cp.async.cg).
//
// Pipeline: 4 stages of 48 KiB (A 16 KiB, B 32 KiB), 1 CTA per SM, all 256 threads load. Step ks waits for
// its own group (one newer group in flight), fences the generic-proxy writes for the tensor cores, and
// synchronizes the CTA; only then does it refill the slot of step ks − 2, whose wgmmas every warpgroup has
// retired (each waits for all but its newest group before the next barrier); then it issues its four
// k16 wgmmas and waits for the previous step's. Prefetch distance: two steps.
//
// Epilogue: accumulator 4·j + 2·i + e of a thread is row 16·warp + lane / 4 + 8·i of its warpgroup's 64,
// column 8·j + 2·(lane % 4) + e; + bias (+ the residual, read as the same float2 pairs), stored as float2
// pairs of consecutive voxels.
#include "ops/cuda/conv3d_wgmma.h"
#include "ops/cuda/hopper_common.cuh"
#include "ops/cuda/wgmma_ops.cuh"

#include <cuda_fp16.h>

namespace h3::ops::cuda_detail {

namespace {

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kThreads = 256;
constexpr int kATileBytes = kBM * kBK * 2;               // 16 KiB
constexpr int kBTileBytes = kBN * kBK * 2;               // 32 KiB
constexpr int kStageBytes = kATileBytes + kBTileBytes;   // 48 KiB
constexpr int kSmemBytes = kStages * kStageBytes + 1024; // + room to align the ring to 1024 bytes
constexpr int64_t kInt32Max = 2147483647;

struct Args {
    const __half* xp;
    const __half* w16;
    const float* bias;
    const float* res; // added after the bias, or null
    float* y;
    int cp, t, hp, wp, cout, kt, kh, kw, to, ho, wo, st, sh, sw, pad_front, k_pitch;
    bool y_pairs;
};

#ifdef H3_SM90A
using namespace sm90;

// 16 bytes global → shared; src_bytes 0 zero-fills. B through L1 (.ca: the kw taps re-read it), A around it.
__device__ __forceinline__ void cp_async_ca(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_cg(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void cp_async_wait_1() {
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif // H3_SM90A

__global__ void __launch_bounds__(kThreads, 1) conv3d_wgmma_kernel(const Args a) {
#ifdef H3_SM90A
    extern __shared__ uint8_t smem_raw[];
    const uint32_t ring = (smem_u32(smem_raw) + 1023) & ~1023u;
    const int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
    const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
    const int frame = blockIdx.z % a.to, b = blockIdx.z / a.to;
    const int np = a.ho * a.wo, khw = a.kh * a.kw;
    // Input frame of temporal tap 0; taps before kt0 meet the causal zero frames and are skipped.
    const int t_base = frame * a.st - a.pad_front;
    const int kt0 = max(0, -t_base), kt1 = min(a.kt, a.t - t_base);
    const int taps = max(0, kt1 - kt0) * khw; // taps on real frames
    const int runs = a.cp / kBK;              // 64-channel runs
    const int nk = taps * runs;
    const int64_t frame_elems = static_cast<int64_t>(a.hp) * a.wp * a.cp;
    const __half* xb = a.xp + static_cast<int64_t>(b) * a.t * frame_elems;

    // Loads: thread copies chunk lc of rows lr + 32·i (A: i < 4, B: i < 8). Rows lr + 32·i share r % 8, so
    // one swizzled column offset serves them all.
    const int lc = tid & 7, lr = tid >> 3;
    const uint32_t st_off = lr * 128 + ((lc ^ (lr & 7)) << 4);
    int a_src[4], b_src[8]; // element offsets (−1: zero-fill) without the step's tap / channel part
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int co = m0 + lr + 32 * i;
        a_src[i] = co < a.cout ? co * a.k_pitch + lc * 8 : -1;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int n = n0 + lr + 32 * i;
        if (n < np) {
            const int oy = n / a.wo, ox = n - oy * a.wo;
            b_src[i] = (oy * a.sh * a.wp + ox * a.sw) * a.cp + lc * 8;
        } else {
            b_src[i] = -1;
        }
    }

    auto load_stage = [&](int ks, int slot) {
        const int run = ks / taps, tap_i = ks - run * taps, ci0 = run * kBK;
        const int tap = kt0 * khw + tap_i; // index into all KT·KH·KW taps
        const int dt = tap / khw, r = tap - dt * khw, dy = r / a.kw, dx = r - dy * a.kw;
        const __half* xs =
            xb + static_cast<int64_t>(t_base + dt) * frame_elems + (dy * a.wp + dx) * a.cp + ci0;
        const __half* ws = a.w16 + static_cast<int64_t>(tap) * a.cp + ci0;
        const uint32_t as = ring + slot * kStageBytes, bs = as + kATileBytes;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool ok = a_src[i] >= 0;
            cp_async_cg(as + st_off + i * 32 * 128, ok ? ws + a_src[i] : a.w16, ok ? 16 : 0);
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const bool ok = b_src[i] >= 0;
            cp_async_ca(bs + st_off + i * 32 * 128, ok ? xs + b_src[i] : a.xp, ok ? 16 : 0);
        }
    };

    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < 2; ++s) {
        if (s < nk) load_stage(s, s);
        cp_async_commit(); // empty groups keep the count uniform
    }
    for (int ks = 0; ks < nk; ++ks) {
        cp_async_wait_1();   // step ks has landed (for this thread's chunks) ...
        fence_proxy_async(); // ... and is visible to the tensor cores ...
        __syncthreads();     // ... for all threads; every warpgroup has retired step ks − 2's wgmmas
        if (ks + 2 < nk) load_stage(ks + 2, (ks + 2) % kStages);
        cp_async_commit();
        const uint32_t as = ring + (ks % kStages) * kStageBytes, bs = as + kATileBytes;
        const uint64_t da = smem_desc(as + wg * (64 * 128), 16, 1024), db = smem_desc(bs, 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk)
            wgmma::ss_f16_n256(acc, desc_add(da, kk * 32), desc_add(db, kk * 32), 1u);
        wgmma_commit();
        wgmma_wait<1>();
        fence_regs(acc);
    }
    wgmma_wait<0>();
    fence_regs(acc);

    const int row = 16 * warp + lane / 4, col = 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int co = m0 + 64 * wg + row + 8 * i;
        if (co >= a.cout) continue;
        const float bv = a.bias ? __ldg(a.bias + co) : 0.0f;
        const int64_t row_off = ((static_cast<int64_t>(b) * a.cout + co) * a.to + frame) * np;
        float* yrow = a.y + row_off;
        const float* rrow = a.res ? a.res + row_off : nullptr;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
            const int n = n0 + 8 * j + col; // even
            if (n >= np) continue;
            float v0 = acc[4 * j + 2 * i] + bv, v1 = acc[4 * j + 2 * i + 1] + bv;
            if (a.y_pairs) { // np even: n + 1 < np
                if (rrow) {
                    const float2 r = __ldg(reinterpret_cast<const float2*>(rrow + n));
                    v0 += r.x;
                    v1 += r.y;
                }
                *reinterpret_cast<float2*>(yrow + n) = make_float2(v0, v1);
            } else {
                yrow[n] = rrow ? v0 + __ldg(rrow + n) : v0;
                if (n + 1 < np) yrow[n + 1] = rrow ? v1 + __ldg(rrow + n + 1) : v1;
            }
        }
    }
#endif // H3_SM90A
}

} // namespace

bool conv3d_wgmma_eligible(const Conv3dGemmOperands& g) {
    if (g.cp <= 0 || g.cp % kBK != 0 || g.cout <= 0 || g.b <= 0 || g.to <= 0) return false;
    const int64_t taps = int64_t{g.kt} * g.kh * g.kw, np = int64_t{g.ho} * g.wo;
    if (int64_t{g.hp} * g.wp * g.cp > kInt32Max) return false;   // in-frame offsets of xp (int)
    if (int64_t{g.cout} * taps * g.cp > kInt32Max) return false; // w16 offsets (int)
    if ((np + kBN - 1) / kBN > 65535) return false;              // grid.y
    return int64_t{g.b} * g.to <= 65535;                         // grid.z
}

int64_t conv3d_wgmma_ctas(const Conv3dGemmOperands& g) {
    const int64_t np = int64_t{g.ho} * g.wo;
    return int64_t{(g.cout + kBM - 1) / kBM} * ((np + kBN - 1) / kBN) * g.b * g.to;
}

cudaError_t conv3d_wgmma_launch(const Conv3dGemmOperands& g, cudaStream_t stream) {
    Args a{};
    a.xp = static_cast<const __half*>(g.xp);
    a.w16 = static_cast<const __half*>(g.w16);
    a.bias = g.bias;
    a.res = g.residual;
    a.y = g.y;
    a.cp = g.cp;
    a.t = g.t;
    a.hp = g.hp;
    a.wp = g.wp;
    a.cout = g.cout;
    a.kt = g.kt;
    a.kh = g.kh;
    a.kw = g.kw;
    a.to = g.to;
    a.ho = g.ho;
    a.wo = g.wo;
    a.st = g.st;
    a.sh = g.sh;
    a.sw = g.sw;
    a.pad_front = g.pad_front;
    a.k_pitch = g.kt * g.kh * g.kw * g.cp;
    const int64_t np = int64_t{g.ho} * g.wo;
    a.y_pairs = np % 2 == 0 && reinterpret_cast<uintptr_t>(g.y) % 8 == 0 &&
                reinterpret_cast<uintptr_t>(g.residual) % 8 == 0;
    if (cudaError_t e = cudaFuncSetAttribute(conv3d_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             kSmemBytes);
        e != cudaSuccess)
        return e;
    // Cout tiles fastest: the CTAs of one voxel tile run together and share its input rows in L2.
    const dim3 grid(static_cast<unsigned>((g.cout + kBM - 1) / kBM),
                    static_cast<unsigned>((np + kBN - 1) / kBN), static_cast<unsigned>(int64_t{g.b} * g.to));
    conv3d_wgmma_kernel<<<grid, kThreads, kSmemBytes, stream>>>(a);
    return cudaGetLastError();
}

} // namespace h3::ops::cuda_detail
