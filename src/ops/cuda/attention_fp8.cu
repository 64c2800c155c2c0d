// e4m3 flash attention for Hopper (sm_90a), head dim 128: the attention op's fp8 mode (ops/attention.h).
// 1. Quantization (plain CUDA): q per head in blocks of 128 rows, k and v per head (one scale over all
//    keys, from a max pass), each scale a power of two (fp8_block_scale of the max |x|), written as e4m3
//    into scratch: q8/k8 [S, H, 128] bytes, v as Vᵀ [Hkv, 128, Sk_pad] with keys permuted inside each
//    32-key group (fp8_attention_key_of) so the P fragment built from the score accumulators feeds P·V
//    directly.
// 2. Attention: the warp-specialized pipeline of attention_hopper.cu with e4m3 wgmmas (k = 32), K-major
//    operands only (hence the transposed V copy), BN keys per block (128, or 192 with Vᵀ in 64-key slabs).
//    Scores s = q8·k8 · (q_scale·k_scale·softmax_scale) in fp32; online softmax in fp32; P = 2^(x − m + 8)
//    rounded to e4m3 (the 2^8 keeps small weights out of e4m3's subnormals), the output scaled by
//    v_scale / 256; the row sums use the unrounded P.
#include "ops/cuda/attention_hopper.h"
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/hopper_common.cuh"
#include "ops/cuda/wgmma_ops.cuh"
#include "ops/fp8_scale.h"

#include <type_traits>

namespace h3::ops::cuda_detail {

namespace {

constexpr int kHeadDim = 128;
constexpr int kBM = kFp8AttnBlockM;
constexpr int kStages = 2;
constexpr int kThreads = 384;
constexpr int kQBytes = kBM * 128;                     // the Q tile: 128 rows of 128 e4m3
constexpr int kQuantRows = 128;                        // rows (keys) per quantization thread block
[[maybe_unused]] constexpr int kPBias = kFp8AttnPBias; // P = 2^(x − m + kPBias) (device code only)

// ---- quantization -------------------------------------------------------------------------------------
__device__ float block_max(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    float r = red[0];
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) r = fmaxf(r, red[w]);
    return r;
}

__device__ __forceinline__ uint32_t pack4_e4m3(float a, float b, float c, float d) {
    const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// The quantization kernels take a tile of kQuantRows rows × 128 bf16 of one head, read coalesced: thread t
// holds 16-byte chunk t % 16 of rows t / 16 + 8i (i < 16), so a warp reads two whole 256-byte rows per
// load. The grids run the heads fastest (block (head, row block)): blocks in flight together read
// neighbouring bytes of [S, H, 128] instead of one head's 256 bytes every H·256.
constexpr int kChunks = kHeadDim * 2 / 16;             // 16-byte chunks per row
constexpr int kRowsPerPass = kQuantRows / kChunks;     // rows one pass of the block's threads covers (8)
constexpr int kTilePasses = kQuantRows / kRowsPerPass; // passes (rows per thread): 16

// This thread's chunks of rows row0.. of head h (rows past s_len read as zeros); their max |x|.
__device__ __forceinline__ float load_tile(const bf16* x, int row0, int s_len, int heads, int h,
                                           uint4 (&raw)[kTilePasses]) {
    const int c = threadIdx.x % kChunks, r = threadIdx.x / kChunks;
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < kTilePasses; ++i) {
        const int row = row0 + r + kRowsPerPass * i;
        raw[i] =
            row < s_len
                ? reinterpret_cast<const uint4*>(x + (static_cast<int64_t>(row) * heads + h) * kHeadDim)[c]
                : make_uint4(0, 0, 0, 0);
        const bf16* e = reinterpret_cast<const bf16*>(&raw[i]);
#pragma unroll
        for (int k = 0; k < 8; ++k) amax = fmaxf(amax, fabsf(__bfloat162float(e[k])));
    }
    return amax;
}

// Per head, the max |x| over all rows of k (blockIdx.z 0) or v (1): block (head, row block); the result as
// float bits (atomicMax on non-negative floats' bits orders them as floats), amax_bits zeroed by the caller.
__global__ void __launch_bounds__(kQuantRows)
    kv_amax_kernel(const bf16* __restrict__ k, const bf16* __restrict__ v, int* __restrict__ k_amax_bits,
                   int* __restrict__ v_amax_bits, int s_len, int heads) {
    __shared__ float red[kQuantRows / 32];
    const int h = blockIdx.x;
    uint4 raw[kTilePasses];
    const float amax = load_tile(blockIdx.z ? v : k, blockIdx.y * kQuantRows, s_len, heads, h, raw);
    const float m = block_max(amax, red);
    if (threadIdx.x == 0)
        atomicMax((blockIdx.z ? v_amax_bits : k_amax_bits) + h, static_cast<int>(fp8_float_bits(m)));
}

// q or k: block (head h, row block rb); x [S, H, 128] bf16 -> x8 [S, H, 128] e4m3.
// head_amax_bits null: each block's scale from its own max, written to scale[H, ceil(S/128)]; else the
// head's scale from head_amax_bits[h] (scale unused).
__global__ void __launch_bounds__(kQuantRows)
    quantize_rows_kernel(const bf16* __restrict__ x, uint8_t* __restrict__ x8, float* __restrict__ scale,
                         const int* __restrict__ head_amax_bits, int s_len, int heads) {
    __shared__ float red[kQuantRows / 32];
    const int h = blockIdx.x, rb = blockIdx.y, row0 = rb * kQuantRows;
    uint4 raw[kTilePasses];
    const float amax = load_tile(x, row0, s_len, heads, h, raw);
    float sc;
    if (head_amax_bits) {
        sc = fp8_block_scale(fp8_bits_float(static_cast<uint32_t>(head_amax_bits[h])));
    } else {
        sc = fp8_block_scale(block_max(amax, red));
        if (threadIdx.x == 0) scale[h * gridDim.y + rb] = sc;
    }
    const float inv = 1.0f / sc; // exact: a power of two
    const int c = threadIdx.x % kChunks, r = threadIdx.x / kChunks;
#pragma unroll
    for (int i = 0; i < kTilePasses; ++i) {
        const int row = row0 + r + kRowsPerPass * i;
        if (row >= s_len) break;
        const bf16* e = reinterpret_cast<const bf16*>(&raw[i]);
        uint2 out;
        out.x = pack4_e4m3(__bfloat162float(e[0]) * inv, __bfloat162float(e[1]) * inv,
                           __bfloat162float(e[2]) * inv, __bfloat162float(e[3]) * inv);
        out.y = pack4_e4m3(__bfloat162float(e[4]) * inv, __bfloat162float(e[5]) * inv,
                           __bfloat162float(e[6]) * inv, __bfloat162float(e[7]) * inv);
        reinterpret_cast<uint2*>(x8 + (static_cast<int64_t>(row) * heads + h) * kHeadDim)[c] = out;
    }
}

// v: block (kv head h, key block kb); v [Sk, Hkv, 128] bf16 -> vt [Hkv, 128, sk_pad] e4m3 (keys permuted
// within 32-key groups) with the head's scale from amax_bits[h].
__global__ void __launch_bounds__(kQuantRows)
    quantize_v_kernel(const bf16* __restrict__ v, uint8_t* __restrict__ vt, const int* __restrict__ amax_bits,
                      int sk, int kv_heads, int sk_pad) {
    __shared__ bf16 tile[kQuantRows][kHeadDim];
    const int h = blockIdx.x, kb = blockIdx.y;
    {
        uint4 raw[kTilePasses];
        load_tile(v, kb * kQuantRows, sk, kv_heads, h, raw); // rows past Sk: zeros
        const int c = threadIdx.x % kChunks, r = threadIdx.x / kChunks;
#pragma unroll
        for (int i = 0; i < kTilePasses; ++i)
            reinterpret_cast<uint4*>(&tile[r + kRowsPerPass * i][0])[c] = raw[i];
    }
    const float inv = 1.0f / fp8_block_scale(fp8_bits_float(static_cast<uint32_t>(amax_bits[h])));
    __syncthreads();
    const int d = threadIdx.x; // this thread writes Vᵀ row d of the block: 128 keys
    uint8_t* dst = vt + (static_cast<int64_t>(h) * kHeadDim + d) * sk_pad + kb * kQuantRows;
#pragma unroll
    for (int q = 0; q < 8; ++q) { // 16 positions per 16-byte store
        float f[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int pos = q * 16 + i;
            const int k = (pos & ~31) + fp8_attention_key_of(pos & 31);
            f[i] = __bfloat162float(tile[k][d]) * inv;
        }
        uint4 out;
        out.x = pack4_e4m3(f[0], f[1], f[2], f[3]);
        out.y = pack4_e4m3(f[4], f[5], f[6], f[7]);
        out.z = pack4_e4m3(f[8], f[9], f[10], f[11]);
        out.w = pack4_e4m3(f[12], f[13], f[14], f[15]);
        reinterpret_cast<uint4*>(dst)[q] = out;
    }
}

// ---- attention ----------------------------------------------------------------------------------------
// Tiling for BN keys per block: the K tile [BN keys][128 B] (128-byte swizzle, one TMA box); the Vᵀ tile
// [128 d][BN keys] in slabs of kVSlab keys (128-byte swizzle for 128-key slabs, 64-byte for 64-key ones).
template <int kBN> struct Fp8Tile {
    static_assert(kBN == 128 || kBN == 192, "fp8 attention: BN 128 or 192");
    static constexpr int kBytes = kBN * 128; // a K or Vᵀ tile
    static constexpr int kVSlab = kBN % 128 == 0 ? 128 : 64;
};

template <int kBN> struct SmemFp8 {
    uint8_t q[kQBytes];                       // [128 rows][128 B]
    uint8_t k[kStages][Fp8Tile<kBN>::kBytes]; // [key][128 B]
    uint8_t v[kStages][Fp8Tile<kBN>::kBytes]; // Vᵀ slabs: [slab][d][kVSlab keys]
    uint64_t q_full, k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
};

struct Fp8Scales {
    const float* q;         // [H, nqb]
    const int* k_amax_bits; // [Hkv]
    const int* v_amax_bits; // [Hkv]
    int nqb;
};

#ifdef H3_SM90A
using namespace sm90;

template <int kBN> struct Fp8Consumer {
    using T = Fp8Tile<kBN>;
    static constexpr int kS = kBN / 2;       // score accumulators per thread
    static constexpr int kPSteps = kBN / 32; // P·V k-steps (32 keys each)

    __device__ static void fence_p(uint32_t (&p)[kPSteps][4]) {
#pragma unroll
        for (int kk = 0; kk < kPSteps; ++kk) fence_regs(p[kk]);
    }
    __device__ static void ss(float (&s)[kS], uint64_t da, uint64_t db, uint32_t acc) {
        if constexpr (kBN == 128)
            wgmma::ss_e4m3_n128(s, da, db, acc);
        else
            wgmma::ss_e4m3_n192(s, da, db, acc);
    }
    __device__ static void rs(float (&s)[kS], const uint32_t (&a)[4], uint64_t db, uint32_t acc) {
        if constexpr (kBN == 128)
            wgmma::rs_e4m3_n128(s, a[0], a[1], a[2], a[3], db, acc);
        else
            wgmma::rs_e4m3_n192(s, a[0], a[1], a[2], a[3], db, acc);
    }
    // S = Q·Kᵀ, Q from the shared tile at qa.
    __device__ static void issue_s(float (&s)[kS], uint32_t qa, uint32_t kb) {
        const uint64_t da0 = smem_desc(qa, 16, 1024), db0 = smem_desc(kb, 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            ss(s, desc_add(da0, kk * 32), desc_add(db0, kk * 32), kk > 0 ? 1u : 0u);
        wgmma_commit();
    }
    // The same with Q's A fragments held in registers (qr, loaded once by load_q).
    __device__ static void issue_s_rq(float (&s)[kS], const uint32_t (&qr)[4][4], uint32_t kb) {
        const uint64_t db0 = smem_desc(kb, 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) rs(s, qr[kk], desc_add(db0, kk * 32), kk > 0 ? 1u : 0u);
        wgmma_commit();
    }
    // This warp's A fragments of Q (16 rows of the consumer's 64) from the 128-byte-swizzled tile at qa:
    // per k-step of 32 bytes, rows g / g + 8 at bytes 4t..4t+3 and 16+4t..16+4t+3 (the layout of the P
    // fragments issue_pv takes).
    __device__ static void load_q(uint32_t (&qr)[4][4], uint32_t qa) {
        const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, g = lane / 4, t = lane % 4;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int row = warp * 16 + g + 8 * (r & 1), byte = 32 * kk + 16 * (r >> 1) + 4 * t;
                const uint32_t addr = qa + row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15));
                asm volatile("ld.shared.b32 %0, [%1];" : "=r"(qr[kk][r]) : "r"(addr));
            }
    }
    // O += P·V over the block's Vᵀ slabs (k-step kk: keys 32kk..32kk+31).
    __device__ static void issue_pv(float (&o)[64], const uint32_t (&p)[kPSteps][4], uint32_t vb) {
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kPSteps; ++kk) {
            const int slab = kk * 32 / T::kVSlab, within = kk * 32 % T::kVSlab;
            const uint32_t base = vb + slab * (T::kVSlab * kHeadDim);
            const uint64_t db = T::kVSlab == 128 ? smem_desc(base, 16, 1024) : smem_desc_sw64(base, 16, 512);
            wgmma::rs_e4m3_n128(o, p[kk][0], p[kk][1], p[kk][2], p[kk][3], desc_add(db, within), 1u);
        }
        wgmma_commit();
    }
    // sl2: the score multiplier (scales · softmax scale · log2 e).
    // Masks, updates the row maxima / sums and leaves P = 2^(x − m + kPBias) in s (pack_p makes the
    // fragments).
    template <bool kFirst, bool kMask, bool kCausal>
    __device__ static void softmax(float (&s)[kS], int col0, int sk, int row0, float sl2, float (&m)[2],
                                   float (&l)[2], float (&corr)[2]) {
        constexpr int kGroups = kBN / 8; // 8-column groups of the accumulator layout
        const int t = threadIdx.x % 4;
        if constexpr (kMask) {
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                int lim = sk - col0 - 2 * t;
                if constexpr (kCausal) lim = min(lim, row0 + 8 * i + 1 - col0 - 2 * t);
#pragma unroll
                for (int jj = 0; jj < kGroups; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        if (8 * jj + e >= lim) s[4 * jj + 2 * i + e] = -INFINITY;
            }
        }
        constexpr float kUnbias = 1.0f / (1 << kPBias);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            float bm = -INFINITY;
#pragma unroll
            for (int jj = 0; jj < kGroups; ++jj)
                bm = fmaxf(bm, fmaxf(s[4 * jj + 2 * i], s[4 * jj + 2 * i + 1]));
            bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, 1));
            bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, 2));
            const float mx = fmaxf(m[i], bm == -INFINITY ? -INFINITY : bm * sl2);
            const float use = mx == -INFINITY ? 0.0f : mx;
            corr[i] = kFirst ? 1.0f : ex2(m[i] - use);
            m[i] = mx;
            const float msl = use - static_cast<float>(kPBias);
            float sum = 0.0f;
#pragma unroll
            for (int jj = 0; jj < kGroups; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float& x = s[4 * jj + 2 * i + e];
                    x = ex2(fmaf(x, sl2, -msl));
                    sum += x;
                }
            l[i] = kFirst ? sum * kUnbias : l[i] * corr[i] + sum * kUnbias;
        }
    }
    // P (the exponentials left in s by softmax) as e4m3 A fragments for P·V.
    __device__ static void pack_p(const float (&s)[kS], uint32_t (&p)[kPSteps][4]) {
        // e4m3 A fragments (k = 32 per step): positions 4t..4t+3 take keys 2t, 2t+1, 8+2t, 9+2t of the
        // step's first 16 keys (the Vᵀ copy stores keys in that order), rows g and g + 8.
#pragma unroll
        for (int kk = 0; kk < kPSteps; ++kk) {
            const int b = 16 * kk;
            p[kk][0] = pack_e4m3(s[b + 0], s[b + 1], s[b + 4], s[b + 5]);
            p[kk][1] = pack_e4m3(s[b + 2], s[b + 3], s[b + 6], s[b + 7]);
            p[kk][2] = pack_e4m3(s[b + 8], s[b + 9], s[b + 12], s[b + 13]);
            p[kk][3] = pack_e4m3(s[b + 10], s[b + 11], s[b + 14], s[b + 15]);
        }
    }
};
#endif // H3_SM90A

// kBN: keys per block (128 or 192); kLazy: skip a warp's O rescale when none of its rows' maxima moved;
// kQRegs: S = Q·Kᵀ takes Q from registers (loaded once) instead of shared memory. With BN 128 a block's P
// is packed right after its softmax into the P set the in-flight P·V does not read (two sets, alternating);
// with BN 192 (no registers for two sets) into the one set, after that P·V has completed.
template <int kBN, bool kCausal, bool kLazy, bool kQRegs>
__global__ void __launch_bounds__(kThreads, 1)
    attention_fp8_sm90(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                       const __grid_constant__ CUtensorMap tv, const Fp8Scales sc, bf16* __restrict__ out,
                       float* __restrict__ lse, int sq, int sk, int heads, int group, float scale_log2) {
#ifdef H3_SM90A
    using C = Fp8Consumer<kBN>;
    using T = Fp8Tile<kBN>;
    extern __shared__ uint8_t smem_raw[];
    SmemFp8<kBN>& sm =
        *reinterpret_cast<SmemFp8<kBN>*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    const int wg = threadIdx.x / 128;
    const int m_block = kCausal ? static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)
                                : static_cast<int>(blockIdx.x);
    const int h = blockIdx.y, hk = h / group, m0 = m_block * kBM;
    int n_blocks = (sk + kBN - 1) / kBN;
    if constexpr (kCausal) n_blocks = min(n_blocks, (m0 + kBM + kBN - 1) / kBN);

    if (threadIdx.x == 0) {
        mbar_init(smem_u32(&sm.q_full), 1);
        for (int s = 0; s < kStages; ++s) {
            mbar_init(smem_u32(&sm.k_full[s]), 1);
            mbar_init(smem_u32(&sm.v_full[s]), 1);
            mbar_init(smem_u32(&sm.k_empty[s]), 8);
            mbar_init(smem_u32(&sm.v_empty[s]), 8);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) { // ---- producer
        regs_dealloc<24>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&tq);
            tma_prefetch_map(&tk);
            tma_prefetch_map(&tv);
            const uint32_t qf = smem_u32(&sm.q_full);
            mbar_expect_tx(qf, kQBytes);
            tma_load_3d(smem_u32(sm.q), &tq, qf, 0, h, m0);
            for (int j = 0; j < n_blocks; ++j) {
                const int st = j % kStages;
                const uint32_t ph = (j / kStages) & 1;
                const uint32_t kf = smem_u32(&sm.k_full[st]), vf = smem_u32(&sm.v_full[st]);
                if (j >= kStages) mbar_wait(smem_u32(&sm.k_empty[st]), ph ^ 1);
                mbar_expect_tx(kf, T::kBytes);
                tma_load_3d(smem_u32(sm.k[st]), &tk, kf, 0, hk, j * kBN);
                if (j >= kStages) mbar_wait(smem_u32(&sm.v_empty[st]), ph ^ 1);
                mbar_expect_tx(vf, T::kBytes);
#pragma unroll
                for (int sl = 0; sl < kBN / T::kVSlab; ++sl)
                    tma_load_3d(smem_u32(sm.v[st]) + sl * (T::kVSlab * kHeadDim), &tv, vf,
                                j * kBN + sl * T::kVSlab, 0, hk);
            }
        }
        return;
    }

    regs_alloc<240>();
    const int cw = wg - 1;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    const bool elect = lane == 0;
    const int row0 = m0 + cw * 64 + warp * 16 + lane / 4;
    const uint32_t qa = smem_u32(sm.q) + cw * (64 * 128);
    const int my_bar = 1 + cw, other_bar = 2 - cw;
    const float k_scale = fp8_block_scale(fp8_bits_float(static_cast<uint32_t>(sc.k_amax_bits[hk])));
    const float sl2 = sc.q[h * sc.nqb + m_block] * k_scale * scale_log2;

    float o[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.0f;
    constexpr bool kOneP = kBN == 192;
    float s[C::kS];
    uint32_t p[C::kPSteps][4], p2_regs[kOneP ? 1 : C::kPSteps][4];
    auto& p2 = pick<kOneP>(p, p2_regs);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2];
    const int first_masked = kCausal ? m0 / kBN : n_blocks - (sk % kBN != 0 ? 1 : 0);
    uint32_t qr[4][4]; // Q's A fragments (kQRegs)
    auto issue_s = [&](uint32_t kb) {
        if constexpr (kQRegs)
            C::issue_s_rq(s, qr, kb);
        else
            C::issue_s(s, qa, kb);
    };

    if (cw == 1) named_arrive(1, 256);
    mbar_wait(smem_u32(&sm.q_full), 0);
    if constexpr (kQRegs) C::load_q(qr, qa);
    {
        mbar_wait(smem_u32(&sm.k_full[0]), 0);
        named_sync(my_bar, 256);
        issue_s(smem_u32(sm.k[0]));
        named_arrive(other_bar, 256);
        wgmma_wait<0>();
        fence_regs(s);
        if (elect) mbar_arrive(smem_u32(&sm.k_empty[0]));
        if (first_masked == 0)
            C::template softmax<true, true, kCausal>(s, 0, sk, row0, sl2, m, l, corr);
        else
            C::template softmax<true, false, kCausal>(s, 0, sk, row0, sl2, m, l, corr);
        C::pack_p(s, p);
    }
    auto step = [&](auto mask_tag, int j, auto& pin, auto& pout) {
        constexpr bool kMask = decltype(mask_tag)::value;
        const int st = j % kStages, pst = (j - 1) % kStages;
        mbar_wait(smem_u32(&sm.k_full[st]), (j / kStages) & 1);
        mbar_wait(smem_u32(&sm.v_full[pst]), ((j - 1) / kStages) & 1);
        named_sync(my_bar, 256);
        issue_s(smem_u32(sm.k[st]));
        C::issue_pv(o, pin, smem_u32(sm.v[pst]));
        named_arrive(other_bar, 256);
        wgmma_wait<1>();
        fence_regs(s);
        if (elect) mbar_arrive(smem_u32(&sm.k_empty[st]));
        C::template softmax<false, kMask, kCausal>(s, j * kBN, sk, row0, sl2, m, l, corr);
        if constexpr (!kOneP) C::pack_p(s, pout);
        wgmma_wait<0>();
        fence_regs(o);
        C::fence_p(pin);
        if (elect) mbar_arrive(smem_u32(&sm.v_empty[pst]));
        if constexpr (kOneP) C::pack_p(s, pout); // pout is pin: its P·V has completed
        if (!kLazy || __any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
            for (int jj = 0; jj < 16; ++jj)
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    o[4 * jj + 2 * i] *= corr[i];
                    o[4 * jj + 2 * i + 1] *= corr[i];
                }
        }
    };
    auto last_pv = [&](auto& pin) {
        const int lst = (n_blocks - 1) % kStages;
        mbar_wait(smem_u32(&sm.v_full[lst]), ((n_blocks - 1) / kStages) & 1);
        named_sync(my_bar, 256);
        C::issue_pv(o, pin, smem_u32(sm.v[lst]));
        if (cw == 0) named_arrive(other_bar, 256);
        wgmma_wait<0>();
        fence_regs(o);
        C::fence_p(pin);
        if (elect) mbar_arrive(smem_u32(&sm.v_empty[lst]));
    };
    constexpr std::false_type plain{};
    constexpr std::true_type masked{};
    int j = 1;
    for (; j + 1 < first_masked; j += 2) {
        step(plain, j, p, p2);
        step(plain, j + 1, p2, p);
    }
    for (; j + 1 < n_blocks; j += 2) {
        step(masked, j, p, p2);
        step(masked, j + 1, p2, p);
    }
    if (j < n_blocks) {
        step(masked, j, p, p2);
        last_pv(p2);
    } else {
        last_pv(p);
    }

    // epilogue: O · (v_scale / 2^kPBias) / l
    const float out_scale =
        fp8_block_scale(fp8_bits_float(static_cast<uint32_t>(sc.v_amax_bits[hk]))) / (1 << kPBias);
    const int t = lane % 4;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        float sum = l[i];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = sum > 0.0f ? out_scale / sum : 0.0f;
        const int row = row0 + 8 * i;
        if (row >= sq) continue;
        // m is the row max in the log2 domain of the scaled scores, l the sum of 2^(x − m) (unrounded P,
        // bias removed): ln Σ exp = (m + log2 l)·ln 2.
        if (lse && t == 0)
            lse[static_cast<int64_t>(row) * heads + h] =
                sum > 0.0f ? (m[i] + log2f(sum)) * 0.6931471805599453f : -INFINITY;
        bf16* dst = out + (static_cast<int64_t>(row) * heads + h) * kHeadDim + 2 * t;
#pragma unroll
        for (int jj = 0; jj < 16; ++jj)
            *reinterpret_cast<uint32_t*>(dst + 8 * jj) =
                pack_bf16(o[4 * jj + 2 * i] * inv, o[4 * jj + 2 * i + 1] * inv);
    }
#endif // H3_SM90A
}

int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

using Fp8Kernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, Fp8Scales, bf16*, float*, int, int, int,
                           int, float);

template <int kBN>
Status launch_fp8(const Context& ctx, const HopperAttentionArgs& a, Fp8Kernel kernel, const CUtensorMap& tq,
                  const uint8_t* k8, const uint8_t* vt, int64_t sk_pad, const Fp8Scales& sc) {
    using T = Fp8Tile<kBN>;
    CUtensorMap tk, tv;
    TmaDims dk{.rank = 3,
               .dims = {kHeadDim, static_cast<uint64_t>(a.kv_heads), static_cast<uint64_t>(a.sk)},
               .strides = {kHeadDim, static_cast<uint64_t>(a.kv_heads) * kHeadDim},
               .box = {128, 1, kBN}};
    TmaDims dv{.rank = 3,
               .dims = {static_cast<uint64_t>(sk_pad), kHeadDim, static_cast<uint64_t>(a.kv_heads)},
               .strides = {static_cast<uint64_t>(sk_pad), static_cast<uint64_t>(sk_pad) * kHeadDim},
               .box = {T::kVSlab, kHeadDim, 1},
               .swizzle = T::kVSlab == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B};
    H3_TRY(make_tensor_map(tk, CU_TENSOR_MAP_DATA_TYPE_UINT8, k8, dk));
    H3_TRY(make_tensor_map(tv, CU_TENSOR_MAP_DATA_TYPE_UINT8, vt, dv));
    const size_t smem = sizeof(SmemFp8<kBN>) + 1024;
    H3_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute(attention_fp8_sm90)");
    const dim3 grid(static_cast<unsigned>((a.sq + kBM - 1) / kBM), static_cast<unsigned>(a.heads));
    kernel<<<grid, kThreads, smem, stream_of(ctx)>>>(
        tq, tk, tv, sc, static_cast<bf16*>(a.o), a.lse, static_cast<int>(a.sq), static_cast<int>(a.sk),
        static_cast<int>(a.heads), static_cast<int>(a.heads / a.kv_heads), a.scale * 1.4426950408889634f);
    return check_launch("attention_fp8_sm90");
}

} // namespace

Status hopper_attention_fp8(const Context& ctx, const HopperAttentionArgs& a, const HopperFp8Config& cfg) {
    if (!hopper_kernels_usable(ctx))
        return unimplemented("fp8 attention: needs an sm_90a build on an H100/H200");
    if (!hopper_attention_shape_ok(a)) return unimplemented("fp8 attention: unsupported shape or alignment");
    if (a.dim != kHeadDim || a.batch != 1)
        return unimplemented("fp8 attention: head dim 128 and one sequence only (got head dim " +
                             std::to_string(a.dim) + ", batch " + std::to_string(a.batch) + ")");
    if (cfg.block_n != 128 && cfg.block_n != 192)
        return invalid_argument("fp8 attention: block_n must be 128 or 192, not " +
                                std::to_string(cfg.block_n));
    if (cfg.block_n == 192 && !cfg.lazy_rescale)
        return invalid_argument("fp8 attention: block_n 192 exists with lazy rescaling only");
    if (a.causal && (cfg.block_n != 128 || !cfg.lazy_rescale || cfg.q_in_registers))
        return unimplemented("fp8 attention: causal runs BN 128, lazy rescaling, Q in shared memory only");
    const int64_t nqb = (a.sq + kBM - 1) / kBM, nkb = (a.sk + kQuantRows - 1) / kQuantRows;
    const int64_t sk_pad = nkb * kQuantRows;
    if (nqb > 65535 || nkb > 65535) // the quantization grids' y dimension
        return unimplemented("fp8 attention: at most 65535·128 rows, got " + std::to_string(a.sq) +
                             " queries, " + std::to_string(a.sk) + " keys");
    // scratch: q8 | k8 | vt | q scales | k and v max bits (each 256-byte aligned)
    const int64_t q8_bytes = round_up(a.sq * a.heads * kHeadDim, 256);
    const int64_t k8_bytes = round_up(a.sk * a.kv_heads * kHeadDim, 256);
    const int64_t vt_bytes = round_up(a.kv_heads * kHeadDim * sk_pad, 256);
    const int64_t qs_bytes = round_up(a.heads * nqb * 4, 256), amax_bytes = round_up(2 * a.kv_heads * 4, 256);
    const int64_t total = q8_bytes + k8_bytes + vt_bytes + qs_bytes + amax_bytes;
    H3_ASSIGN_OR_RETURN(void* scratch, ctx.cuda->scratch(static_cast<size_t>(total)));
    uint8_t* base = static_cast<uint8_t*>(scratch);
    uint8_t* q8 = base;
    uint8_t* k8 = q8 + q8_bytes;
    uint8_t* vt = k8 + k8_bytes;
    float* qs = reinterpret_cast<float*>(vt + vt_bytes);
    int* k_amax = reinterpret_cast<int*>(reinterpret_cast<uint8_t*>(qs) + qs_bytes);
    int* v_amax = k_amax + a.kv_heads;
    cudaStream_t stream = stream_of(ctx);
    H3_CUDA_TRY(cudaMemsetAsync(k_amax, 0, static_cast<size_t>(2 * a.kv_heads) * 4, stream),
                "cudaMemsetAsync(amax)");
    const dim3 kv_grid(static_cast<unsigned>(a.kv_heads), static_cast<unsigned>(nkb));
    const bf16* k = static_cast<const bf16*>(a.k);
    const bf16* v = static_cast<const bf16*>(a.v);
    const int sk = static_cast<int>(a.sk), hkv = static_cast<int>(a.kv_heads);
    kv_amax_kernel<<<dim3(kv_grid.x, kv_grid.y, 2), kQuantRows, 0, stream>>>(k, v, k_amax, v_amax, sk, hkv);
    H3_TRY(check_launch("kv_amax_kernel"));
    quantize_rows_kernel<<<dim3(static_cast<unsigned>(a.heads), static_cast<unsigned>(nqb)), kQuantRows, 0,
                           stream>>>(static_cast<const bf16*>(a.q), q8, qs, nullptr, static_cast<int>(a.sq),
                                     static_cast<int>(a.heads));
    H3_TRY(check_launch("quantize_rows_kernel(q)"));
    quantize_rows_kernel<<<kv_grid, kQuantRows, 0, stream>>>(k, k8, nullptr, k_amax, sk, hkv);
    H3_TRY(check_launch("quantize_rows_kernel(k)"));
    quantize_v_kernel<<<kv_grid, kQuantRows, 0, stream>>>(v, vt, v_amax, sk, hkv, static_cast<int>(sk_pad));
    H3_TRY(check_launch("quantize_v_kernel"));

    CUtensorMap tq;
    TmaDims dq{.rank = 3,
               .dims = {kHeadDim, static_cast<uint64_t>(a.heads), static_cast<uint64_t>(a.sq)},
               .strides = {kHeadDim, static_cast<uint64_t>(a.heads) * kHeadDim},
               .box = {128, 1, kBM}};
    H3_TRY(make_tensor_map(tq, CU_TENSOR_MAP_DATA_TYPE_UINT8, q8, dq));
    const Fp8Scales sc{qs, k_amax, v_amax, static_cast<int>(nqb)};
    if (cfg.block_n == 192) {
        const Fp8Kernel kernel = cfg.q_in_registers ? attention_fp8_sm90<192, false, true, true>
                                                    : attention_fp8_sm90<192, false, true, false>;
        return launch_fp8<192>(ctx, a, kernel, tq, k8, vt, sk_pad, sc);
    }
    Fp8Kernel kernel = attention_fp8_sm90<128, false, true, false>;
    if (a.causal)
        kernel = attention_fp8_sm90<128, true, true, false>;
    else if (cfg.q_in_registers)
        kernel = attention_fp8_sm90<128, false, true, true>;
    else if (!cfg.lazy_rescale)
        kernel = attention_fp8_sm90<128, false, false, false>;
    return launch_fp8<128>(ctx, a, kernel, tq, k8, vt, sk_pad, sc);
}

} // namespace h3::ops::cuda_detail
