// conv3d on fp16 tensor cores (the default CUDA path under ctx.allow_tf32 on sm_80+, see conv3d.cu).
//
// Any Cin: both fp16 copies carry Cp = Cin rounded up to a multiple of 8 channels, the extra ones zero
// (conv_in's Cin = 3 runs as Cp = 8), so every channel run is whole 16-byte chunks and the GEMM sees only Cp.
// Three kernels per call, all on the context's stream:
//  1. pad_convert: x fp32 [B, Cin, T, H, W] → xp fp16 [B, T, Hp, Wp, Cp], channels last, the spatial border
//     resolved in its mode, channels Cin .. Cp zero. With an input transform (Conv3dF16Transform: the
//     encoder's GroupNorm + SiLU) each real voxel is transformed in fp32 before the conversion —
//     v = x·scale + shift, each step rounded (group_norm_apply's expression), then v/(1 + exp(−v)) — and the
//     zero border stays zero (PyTorch pads the activation); reflect / replicate borders transform the
//     mirrored voxel. The causal front frames are not materialized: their taps are skipped instead. A
//     64-channel × 32-column tile goes through shared memory so that the reads (along
//     W) and the writes (along C) are both coalesced.
//  2. weight_convert: w fp32 [Cout, Cin, KT, KH, KW] → w16 fp16 [Cout, taps·Cp], k = tap·Cp + ci with
//     tap = (kt·KH + kh)·KW + kw, zero for ci >= Cin.
//  3. The implicit GEMM: M = Cout, N = the Ho·Wo voxels of one output frame (grid.z = B·To, so the causal
//     tap skip is block-uniform), K = (taps on real frames)·Cp. Each K step covers kBK = 32 channels of one
//     tap: the B rows of that step are xp[b, to·st − front + kt, oy·sh + kh, ox·sw + kw, ci0 .. ci0 + 32),
//     contiguous, so every operand moves as 16-byte cp.async chunks (Cp % 8 == 0; chunks past Cp, Cout or
//     the last voxel are zero-filled with src-size 0). A block of 4 warps computes 128 (Cout) × 128 (voxels)
//     through a 4-stage cp.async ring (16 KiB a stage, 64 KiB of dynamic shared memory: two blocks per SM);
//     each warp owns 64 × 64 and issues mma.sync m16n8k16 (fp16 in, fp32 accumulators) on fragments read by
//     ldmatrix from rows of 4 chunks stored with the chunk index XORed by (row / 2) % 4 (the 8 rows of one
//     ldmatrix phase hit 8 distinct 16-byte bank groups). Epilogue: bias, fp32 y [B, Cout, To, Ho, Wo]
//     stored as float2 pairs of consecutive voxels.
//
// Numerics: the operands are rounded to fp16 (10-bit mantissa like TF32, so the same relative rounding of
// ≤ 2^-11 per operand), products and sums in fp32. fp16's exponent is narrower than TF32's: magnitudes below
// 6.1e-5 become subnormal (absolute error ≤ 2^-25 each, negligible against the O(1) activations and weights
// of the encoder) and magnitudes beyond 65504 become ±inf. The conversion does not clamp: an out-of-range
// input then shows up as a non-finite output, loudly, rather than as a silently wrong one (the encoder's
// conv inputs are GroupNorm'ed activations or the residual stream, orders of magnitude below the limit). An
// exact check would cost a pass over x per call; the exact fp32 path (allow_tf32 off) and the TF32 kernel
// (H3_CONV3D=tf32, 8-bit exponent) stay selectable for inputs that need the range.
#include "ops/cuda/conv3d_f16.h"
#include "ops/cuda/conv3d_wgmma.h"

#include <cuda_fp16.h>

#include <algorithm>

namespace h3::ops::cuda_detail {

// cp.async, ldmatrix and mma.sync m16n8k16 need sm_80: on older targets the kernel compiles to a trap and
// conv3d never selects it (cc_major() < 8).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define H3_CONV16_MMA 1
#else
#define H3_CONV16_MMA 0
#endif

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 4, kThreads = 128;
constexpr int kTileHalves = kBM * kBK;                 // one operand tile of one stage (A and B alike)
constexpr int kStageHalves = 2 * kTileHalves;          // A then B
constexpr int kSmemBytes = kStages * kStageHalves * 2; // 64 KiB
static_assert(kBM == kBN, "the loaders share one row mapping for A and B");
static_assert(kBK == 32, "the swizzle below assumes rows of 4 16-byte chunks");

// pad_convert's tile: 64 channels × 32 padded columns, 256 threads.
constexpr int kPadC = 64, kPadX = 32, kPadThreads = 256;

} // namespace

// ---- PTX wrappers (a named namespace: on sm_75, where the kernel body is compiled out, unused functions of
// an anonymous one would warn)
// --------------------------------------------------------------------------------
namespace conv3d_f16_ptx {
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, int src_bytes) {
#if H3_CONV16_MMA
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if H3_CONV16_MMA
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if H3_CONV16_MMA
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* smem) {
#if H3_CONV16_MMA
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}
// c += a·b on one 16×16 (row) by 16×8 (col) fp16 tile, fp32 accumulators.
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if H3_CONV16_MMA
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Half offset of 16-byte chunk `chunk` (0..3) of row `row` in a [128][32] tile: the chunk index XORed by
// (row / 2) % 4, so 8 consecutive rows at one logical chunk land in 8 distinct bank groups.
__device__ __forceinline__ int swz(int row, int chunk) {
    return row * kBK + ((chunk ^ ((row >> 1) & 3)) << 3);
}

} // namespace conv3d_f16_ptx

namespace {

using namespace conv3d_f16_ptx;

// Source index of padded position i, or −1 for a zero (mode: 0 zeros, 1 reflect, 2 replicate), as conv3d.cu.
__device__ __forceinline__ int pad_index(int i, int n, int mode) {
    if (i >= 0 && i < n) return i;
    if (mode == 1) return i < 0 ? -i : 2 * (n - 1) - i;
    if (mode == 2) return i < 0 ? 0 : n - 1;
    return -1;
}

// ---- 1. pad + convert ------------------------------------------------------------------------------------
struct PadArgs {
    const float* x;
    const float* scale; // [B, T, Cin] or null: no transform
    const float* shift; // [B, T, Cin]
    bool silu;
    __half* xp;
    int cin, cp, t, h, w, hp, wp, top, left, mode, xtiles; // cp: xp's channel count (Cin rounded up to 8)
};

// Block (column tile, padded row (b, t, yy)) × channel tile: x[b, c0 .. c0 + 64, t, sy, sx(xx)] into shared
// memory along xx (zero for channels >= Cin), then out along c (channels < Cp) as 4-half (8-byte) stores.
__global__ void __launch_bounds__(kPadThreads) pad_convert_kernel(const PadArgs a) {
    __shared__ float tile[kPadC][kPadX + 1];
    const int xt = static_cast<int>(blockIdx.x % a.xtiles);
    const int64_t row = blockIdx.x / a.xtiles; // (b·T + t)·Hp + yy
    const int yy = static_cast<int>(row % a.hp);
    const int64_t bt = row / a.hp;
    const int tt = static_cast<int>(bt % a.t), b = static_cast<int>(bt / a.t);
    const int c0 = blockIdx.y * kPadC, xx0 = xt * kPadX;
    const int tid = threadIdx.x, tx = tid & 31, ty = tid >> 5;
    const int sy = pad_index(yy - a.top, a.h, a.mode);
    const int xx = xx0 + tx;
    const int sx = xx < a.wp ? pad_index(xx - a.left, a.w, a.mode) : -1;
    const int64_t plane = static_cast<int64_t>(a.h) * a.w;
#pragma unroll
    for (int j = 0; j < kPadC / 8; ++j) {
        const int c = ty + 8 * j, ci = c0 + c;
        float v = 0.0f;
        if (ci < a.cin && sy >= 0 && sx >= 0) {
            v = __ldg(a.x + (static_cast<int64_t>(b) * a.cin + ci) * a.t * plane + tt * plane +
                      static_cast<int64_t>(sy) * a.w + sx);
            if (a.scale) {
                const int64_t k = (static_cast<int64_t>(b) * a.t + tt) * a.cin + ci;
                v = __fadd_rn(__fmul_rn(v, __ldg(a.scale + k)), __ldg(a.shift + k));
                if (a.silu) v = v / (1.0f + expf(-v));
            }
        }
        tile[c][tx] = v;
    }
    __syncthreads();
    __half* dst_row = a.xp + static_cast<int64_t>(row) * a.wp * a.cp;
#pragma unroll
    for (int j = 0; j < (kPadX * kPadC / 4) / kPadThreads; ++j) {
        const int u = tid + kPadThreads * j;
        const int xl = u / (kPadC / 4), c = (u % (kPadC / 4)) * 4;
        const int x_out = xx0 + xl;
        if (x_out >= a.wp || c0 + c >= a.cp) continue; // Cp % 8 == 0: four channels are all in or all out
        const __half2 lo = __floats2half2_rn(tile[c][xl], tile[c + 1][xl]);
        const __half2 hi = __floats2half2_rn(tile[c + 2][xl], tile[c + 3][xl]);
        uint2 v;
        v.x = *reinterpret_cast<const uint32_t*>(&lo);
        v.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(dst_row + static_cast<int64_t>(x_out) * a.cp + c0 + c) = v;
    }
}

// ---- 2. weight convert -----------------------------------------------------------------------------------
// w16[co, tap·Cp + ci] = w[co, ci, tap] for ci < Cin, 0 for Cin <= ci < Cp; consecutive threads write
// consecutive halves.
__global__ void weight_convert_kernel(const float* __restrict__ w, __half* __restrict__ w16, int64_t cout,
                                      int64_t cin, int64_t cp, int64_t taps) {
    const int64_t n = cout * cp * taps, k = cp * taps;
    for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
         o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t co = o / k, r = o - co * k, tap = r / cp, ci = r - tap * cp;
        w16[o] = ci < cin ? __float2half_rn(__ldg(w + (co * cin + ci) * taps + tap)) : __float2half_rn(0.0f);
    }
}

// ---- 3. implicit GEMM ------------------------------------------------------------------------------------
struct GemmArgs {
    const __half* xp;  // [B, T, Hp, Wp, Cp]
    const __half* w16; // [Cout, taps·Cp]
    const float* bias; // [Cout] or null
    float* y;          // [B, Cout, To, Ho, Wo]
    int cin;           // Cp: the padded channel count of xp and w16 (a multiple of 8), the only one seen here
    int t, hp, wp, cout, kt, kh, kw, to, ho, wo, st, sh, sw, pad_front;
    int k_pitch;  // taps·Cp: w16's row pitch
    bool y_pairs; // Ho·Wo even and y 8-byte aligned: float2 stores
};

__global__ void __launch_bounds__(kThreads, 2) conv3d_f16_kernel(const GemmArgs a) {
#if H3_CONV16_MMA
    extern __shared__ uint4 smem_raw[];
    __half* smem = reinterpret_cast<__half*>(smem_raw);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
    const int frame = blockIdx.z % a.to, b = blockIdx.z / a.to;
    const int np = a.ho * a.wo, khw = a.kh * a.kw;
    // Input frame of temporal tap 0; taps before kt0 meet the causal zero frames and are skipped.
    const int t_base = frame * a.st - a.pad_front;
    const int kt0 = max(0, -t_base), kt1 = min(a.kt, a.t - t_base);
    const int cchunks = (a.cin + kBK - 1) / kBK;
    const int nk = max(0, kt1 - kt0) * khw * cchunks; // K steps of kBK channels within one tap
    const int64_t frame_elems = static_cast<int64_t>(a.hp) * a.wp * a.cin;
    const __half* xb = a.xp + static_cast<int64_t>(b) * a.t * frame_elems;

    // Loads: thread copies chunk lc of rows lr + 32·i (i < 4) of both tiles.
    const int lc = tid & 3, lr = tid >> 2;
    int a_src[4], b_src[4]; // element offsets (−1: zero-fill) without the step's tap / channel part
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int co = m0 + lr + 32 * i;
        a_src[i] = co < a.cout ? co * a.k_pitch + lc * 8 : -1;
        const int n = n0 + lr + 32 * i;
        if (n < np) {
            const int oy = n / a.wo, ox = n - oy * a.wo;
            b_src[i] = (oy * a.sh * a.wp + ox * a.sw) * a.cin + lc * 8;
        } else {
            b_src[i] = -1;
        }
    }
    const int st_off = swz(lr, lc); // rows lr + 32·i share (row / 2) % 4, hence the swizzled column

    auto load_stage = [&](int ks, int slot) {
        const int tap_i = ks / cchunks, ci0 = (ks - tap_i * cchunks) * kBK;
        const int tap = kt0 * khw + tap_i; // index into all KT·KH·KW taps
        const int dt = tap / khw, r = tap - dt * khw, dy = r / a.kw, dx = r - dy * a.kw;
        const __half* xs =
            xb + static_cast<int64_t>(t_base + dt) * frame_elems + (dy * a.wp + dx) * a.cin + ci0;
        const __half* ws = a.w16 + static_cast<int64_t>(tap) * a.cin + ci0;
        const bool c_ok = ci0 + lc * 8 < a.cin;
        __half* as = smem + slot * kStageHalves;
        __half* bs = as + kTileHalves;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool ok = c_ok && a_src[i] >= 0;
            cp_async_16(as + st_off + i * 32 * kBK, ok ? ws + a_src[i] : a.w16, ok ? 16 : 0);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const bool ok = c_ok && b_src[i] >= 0;
            cp_async_16(bs + st_off + i * 32 * kBK, ok ? xs + b_src[i] : a.xp, ok ? 16 : 0);
        }
    };

    // Warp tile 64 × 64 at (wm, wn): 4 m16 tiles × 8 n8 tiles.
    const int wm = (warp >> 1) * 64, wn = (warp & 1) * 64;
    const int sw = (lane >> 1) & 3; // (row / 2) % 4 of every row this lane addresses in ldmatrix
    // ldmatrix.x4 row addresses: A matrices (rows 0-7 | 8-15) × (k 0-7 | 8-15); B (n 0-7: k lo, k hi | n
    // 8-15).
    const int a_row = wm + (lane & 15), a_hi = lane >> 4;
    const int b_row = wn + (lane & 7) + ((lane >> 4) << 3), b_hi = (lane >> 3) & 1;

    float acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < nk) load_stage(s, s);
        cp_async_commit(); // empty groups keep the count uniform
    }
    for (int ks = 0; ks < nk; ++ks) {
        cp_async_wait<kStages - 2>(); // step ks has landed (for this thread) ...
        __syncthreads();              // ... for all threads, and slot (ks − 1) % S is free again
        const int pre = ks + kStages - 1;
        if (pre < nk) load_stage(pre, pre % kStages);
        cp_async_commit();
        const __half* as = smem + (ks % kStages) * kStageHalves;
        const __half* bs = as + kTileHalves;
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
            uint32_t af[4][4], bq[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
                ldsm_x4(af[i], as + (a_row + 16 * i) * kBK + (((2 * kk + a_hi) ^ sw) << 3));
#pragma unroll
            for (int j = 0; j < 4; ++j)
                ldsm_x4(bq[j], bs + (b_row + 16 * j) * kBK + (((2 * kk + b_hi) ^ sw) << 3));
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    mma_f16(acc[i][j], af[i], bq[j >> 1][(j & 1) * 2], bq[j >> 1][(j & 1) * 2 + 1]);
        }
    }
    cp_async_wait<0>();

    // Epilogue: accumulator (i, j, e) is row g + 8·(e / 2), columns 2·t4 + e % 2 of tile (i, j).
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int co = m0 + wm + 16 * i + g + 8 * h;
            if (co >= a.cout) continue;
            const float bv = a.bias ? __ldg(a.bias + co) : 0.0f;
            float* yrow = a.y + ((static_cast<int64_t>(b) * a.cout + co) * a.to + frame) * np;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int n = n0 + wn + 8 * j + 2 * t4; // even
                if (n >= np) continue;
                const float v0 = acc[i][j][2 * h] + bv, v1 = acc[i][j][2 * h + 1] + bv;
                if (a.y_pairs) {
                    *reinterpret_cast<float2*>(yrow + n) = make_float2(v0, v1); // np even: n + 1 < np
                } else {
                    yrow[n] = v0;
                    if (n + 1 < np) yrow[n + 1] = v1;
                }
            }
        }
#else
    __trap(); // sm_80+ only: the host never selects this kernel below cc 8
#endif
}

constexpr int64_t kInt32Max = 2147483647;

int64_t padded_h(const Conv3dF16Problem& p) {
    return int64_t{p.h} + p.pad_top + p.pad_bottom;
}
int64_t padded_w(const Conv3dF16Problem& p) {
    return int64_t{p.w} + p.pad_left + p.pad_right;
}
size_t round_up(size_t v) {
    return (v + 255) / 256 * 256;
}
// Cin rounded up to a multiple of 8: the channel count of both fp16 copies.
int64_t padded_c(const Conv3dF16Problem& p) {
    return (int64_t{p.cin} + 7) / 8 * 8;
}
size_t xp_bytes(const Conv3dF16Problem& p) {
    return round_up(static_cast<size_t>(int64_t{p.b} * p.t * padded_h(p) * padded_w(p) * padded_c(p)) * 2);
}

} // namespace

bool conv3d_f16_eligible(const Conv3dF16Problem& p) {
    if (p.cin <= 0 || p.cout <= 0) return false;
    const int64_t hp = padded_h(p), wp = padded_w(p), np = int64_t{p.ho} * p.wo, cp = padded_c(p);
    const int64_t taps = int64_t{p.kt} * p.kh * p.kw;
    if (hp * wp * cp > kInt32Max) return false;                // in-frame offsets of xp (int)
    if (int64_t{p.cout} * taps * cp > kInt32Max) return false; // w16 offsets (int)
    if (np > int64_t{65535} * kBN) return false;               // grid.y
    if (int64_t{p.b} * p.to > 65535) return false;             // grid.z
    const int64_t pad_blocks = int64_t{p.b} * p.t * hp * ((wp + kPadX - 1) / kPadX);
    return pad_blocks <= kInt32Max && (cp + kPadC - 1) / kPadC <= 65535;
}

size_t conv3d_f16_scratch_bytes(const Conv3dF16Problem& p) {
    const int64_t taps = int64_t{p.kt} * p.kh * p.kw;
    return xp_bytes(p) + round_up(static_cast<size_t>(int64_t{p.cout} * taps * padded_c(p)) * 2);
}

namespace {

// The wgmma GEMM's view of a problem (operand pointers left to the caller).
Conv3dGemmOperands wgmma_operands(const Conv3dF16Problem& p) {
    Conv3dGemmOperands g;
    g.b = p.b;
    g.cp = static_cast<int>(padded_c(p));
    g.t = p.t;
    g.hp = static_cast<int>(padded_h(p));
    g.wp = static_cast<int>(padded_w(p));
    g.cout = p.cout;
    g.kt = p.kt;
    g.kh = p.kh;
    g.kw = p.kw;
    g.to = p.to;
    g.ho = p.ho;
    g.wo = p.wo;
    g.st = p.st;
    g.sh = p.sh;
    g.sw = p.sw;
    g.pad_front = p.pad_front;
    return g;
}

} // namespace

bool conv3d_f16_wgmma_eligible(const Conv3dF16Problem& p) {
    return conv3d_f16_eligible(p) && conv3d_wgmma_eligible(wgmma_operands(p));
}

int64_t conv3d_f16_wgmma_ctas(const Conv3dF16Problem& p) {
    return conv3d_wgmma_ctas(wgmma_operands(p));
}

cudaError_t conv3d_f16_launch(const Conv3dF16Problem& p, const Conv3dF16Transform& in, const float* x,
                              const float* w, const float* bias, float* y, void* scratch, cudaStream_t stream,
                              const char** failed, Conv3dF16Gemm gemm, const float* residual) {
    if (residual && gemm == Conv3dF16Gemm::kMma) {
        if (failed) *failed = "conv3d fp16: the mma.sync GEMM adds no residual";
        return cudaErrorInvalidValue;
    }
    const int hp = static_cast<int>(padded_h(p)), wp = static_cast<int>(padded_w(p));
    const int64_t taps = int64_t{p.kt} * p.kh * p.kw;
    const int cp = static_cast<int>(padded_c(p)); // eligible: hp·wp·cp fits int
    auto* xp = static_cast<__half*>(scratch);
    auto* w16 = reinterpret_cast<__half*>(static_cast<char*>(scratch) + xp_bytes(p));
    auto fail = [&](const char* what, cudaError_t e) {
        if (failed) *failed = what;
        return e;
    };

    PadArgs pa{};
    pa.x = x;
    pa.scale = in.scale;
    pa.shift = in.shift;
    pa.silu = in.silu;
    pa.xp = xp;
    pa.cin = p.cin;
    pa.cp = cp;
    pa.t = p.t;
    pa.h = p.h;
    pa.w = p.w;
    pa.hp = hp;
    pa.wp = wp;
    pa.top = p.pad_top;
    pa.left = p.pad_left;
    pa.mode = p.mode;
    pa.xtiles = (wp + kPadX - 1) / kPadX;
    const dim3 pad_grid(static_cast<unsigned>(int64_t{p.b} * p.t * hp * pa.xtiles),
                        static_cast<unsigned>((cp + kPadC - 1) / kPadC));
    pad_convert_kernel<<<pad_grid, kPadThreads, 0, stream>>>(pa);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return fail("conv3d fp16 input pad/convert", e);

    const int64_t w_elems = int64_t{p.cout} * cp * taps;
    const unsigned w_blocks = static_cast<unsigned>(std::min<int64_t>((w_elems + 255) / 256, 65535LL * 16));
    weight_convert_kernel<<<w_blocks, 256, 0, stream>>>(w, w16, p.cout, p.cin, cp, taps);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return fail("conv3d fp16 weight convert", e);

    if (gemm == Conv3dF16Gemm::kWgmma) {
        Conv3dGemmOperands g = wgmma_operands(p);
        g.xp = xp;
        g.w16 = w16;
        g.bias = bias;
        g.y = y;
        g.residual = residual;
        if (cudaError_t e = conv3d_wgmma_launch(g, stream); e != cudaSuccess)
            return fail("conv3d fp16 implicit GEMM (wgmma)", e);
        return cudaSuccess;
    }
    GemmArgs ga{};
    ga.xp = xp;
    ga.w16 = w16;
    ga.bias = bias;
    ga.y = y;
    ga.cin = cp;
    ga.t = p.t;
    ga.hp = hp;
    ga.wp = wp;
    ga.cout = p.cout;
    ga.kt = p.kt;
    ga.kh = p.kh;
    ga.kw = p.kw;
    ga.to = p.to;
    ga.ho = p.ho;
    ga.wo = p.wo;
    ga.st = p.st;
    ga.sh = p.sh;
    ga.sw = p.sw;
    ga.pad_front = p.pad_front;
    ga.k_pitch = static_cast<int>(taps * cp);
    const int64_t np = int64_t{p.ho} * p.wo;
    ga.y_pairs = np % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 8 == 0;
    if (cudaError_t e =
            cudaFuncSetAttribute(conv3d_f16_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        e != cudaSuccess)
        return fail("cudaFuncSetAttribute(conv3d fp16)", e);
    // Cout tiles fastest: the blocks of one voxel tile run together and share its input rows in L2.
    const dim3 grid(static_cast<unsigned>((p.cout + kBM - 1) / kBM),
                    static_cast<unsigned>((np + kBN - 1) / kBN), static_cast<unsigned>(int64_t{p.b} * p.to));
    conv3d_f16_kernel<<<grid, kThreads, kSmemBytes, stream>>>(ga);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return fail("conv3d fp16 implicit GEMM", e);
    return cudaSuccess;
}

} // namespace h3::ops::cuda_detail
