// Block-sparse attention (ops/vsa.h) on Hopper tensor cores (sm_90a), bf16, head dim 128: the VSA tile lists
// on wgmma, in the manner of the dense kernel (attention_hopper.cu).
//  1. Gather: q, k and v are copied into tile order — slot s of tile t is row t·64 + s of a
//     [tiles·64, H, 128] copy in ctx's scratch, pad slots zero — one block per slot row (a packed row's heads
//     are one contiguous run), so every tile is a box the TMA unit can load.
//  2. Attention: one CTA per (64-row query tile, head), the query tiles fastest in the grid so the CTAs in
//     flight read one or two heads' K/V, which fit in L2. (The head-fastest order first tried ran at ~200
//     TFLOP/s bf16 and ~400 e4m3 at 38 k rows on an H100: ~3.1 TB/s of K/V tile loads, DRAM's rate, so the
//     loads likely missed L2; this order is not yet measured.) 2 warpgroups: warpgroup 0
//     the producer (one thread issues the TMA loads, the warpgroup gives its registers away with setmaxnreg),
//     warpgroup 1 the consumer. Two CTAs share an SM (80 KB of shared memory each), so one's softmax runs
//     under the other's GEMMs. K and V tiles (one 64-key tile per step, in list order) go through a 2-stage
//     ring of full / empty mbarriers. S = Q·Kᵀ is wgmma m64n64 with Q's A fragments in registers (loaded
//     once), O += P·V wgmma m64n128 with P from registers and V read MN-major through the descriptor. Block
//     j's S GEMM is issued with block j−1's P·V; online softmax in fp32 with exp2 (the scale folded into one
//     multiplier); pad keys (slots past the tile's size) masked; O rescaled only when a row max moved.
//  3. The epilogue stores each valid query row at its packed row (the tile map), bf16; with the fused
//     gate add (ops::VsaFusedGateAdd) it first adds gate ⊙ oc of the query tile to the rounded row,
//     vsa_gate_add's arithmetic (vsa_gate_add.cuh): no separate pass over o (read o and gate, write o).
// Out-of-range list entries load tile 0 and are masked entirely (the mma.sync kernel skips them: the same
// result).
// fp8 mode (ops/vsa.h): the gather is also the quantization — q8 per (head, query tile), k8 and Vᵀ per head
// (a max pass first), each tile's Vᵀ [128 d][64 keys] with the keys permuted inside 32-key groups
// (fp8_attention_key_of) so P needs no shuffles — then the same pipeline on e4m3 wgmmas (k = 32): S = Q·Kᵀ
// m64n64 with Q in registers, O += P·V m64n128 over the Vᵀ tile (64-byte swizzle, K-major), P = 2^(x − m + 8)
// rounded to e4m3, the output scaled by v_scale / 256 (attention_fp8.cu's scheme, per 64-key tile).
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/hopper_common.cuh"
#include "ops/cuda/vsa_gate_add.cuh"
#include "ops/cuda/vsa_hopper.h"
#include "ops/cuda/wgmma_ops.cuh"
#include "ops/fp8_scale.h"

namespace h3::ops::cuda_detail {

namespace {

constexpr int kRows = 64; // slots per tile (ops::kVsaTileRows)
constexpr int kD = 128;
constexpr int kThreads = 256;
constexpr int kDefaultStages = 2;       // K/V ring depth unless HopperBlockSparseArgs::stages says otherwise
constexpr int kHalfBytes = kRows * 128; // one 64-column half of a 64-row bf16 tile (128 B per row)

template <int kStages> struct SmemBsa {
    uint8_t q[2][kHalfBytes];          // [column half][slot][128 B], 128-byte swizzled
    uint8_t k[kStages][2][kHalfBytes]; // [stage][column half][key slot][128 B]
    uint8_t v[kStages][2][kHalfBytes];
    uint64_t q_full, k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
};

// Slot row r of q, k or v (blockIdx.y) in tile order: dst row r = src row slot_rows[r], zeros for a pad slot.
// row_bytes: one packed row (H·D·2), a multiple of 16.
__global__ void __launch_bounds__(256)
    bsa_gather_kernel(const uint8_t* __restrict__ q, const uint8_t* __restrict__ k,
                      const uint8_t* __restrict__ v, uint8_t* __restrict__ gq, uint8_t* __restrict__ gk,
                      uint8_t* __restrict__ gv, const int32_t* __restrict__ slot_rows, int64_t row_bytes) {
    const int64_t r = blockIdx.x;
    const uint8_t* src = blockIdx.y == 0 ? q : (blockIdx.y == 1 ? k : v);
    uint8_t* dst = blockIdx.y == 0 ? gq : (blockIdx.y == 1 ? gk : gv);
    const int32_t row = slot_rows[r];
    const uint4* s = reinterpret_cast<const uint4*>(src + static_cast<int64_t>(row) * row_bytes);
    uint4* d = reinterpret_cast<uint4*>(dst + r * row_bytes);
    const int64_t n = row_bytes / 16;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = row >= 0 ? s[i] : make_uint4(0, 0, 0, 0);
}

#ifdef H3_SM90A
using namespace sm90;

struct Consumer {
    static constexpr int kAcc = kRows / 2;  // S registers per thread (m64n64)
    static constexpr int kK16 = kRows / 16; // k16 steps of P·V

    // This warp's A fragments of Q (its 16 of the 64 rows) from the two 128-byte-swizzled column halves at qa
    // and qa + kHalfBytes: per k16 step, rows g / g + 8 at columns 2t, 2t + 1 and 8 + 2t, 9 + 2t.
    __device__ static void load_q(uint32_t (&qr)[kD / 16][4], uint32_t qa) {
        const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, t = lane % 4;
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int row = warp * 16 + lane / 4 + 8 * (r & 1),
                          byte = (kk % 4) * 32 + 16 * (r >> 1) + 4 * t;
                const uint32_t addr =
                    qa + (kk / 4) * kHalfBytes + row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15));
                asm volatile("ld.shared.b32 %0, [%1];" : "=r"(qr[kk][r]) : "r"(addr));
            }
    }
    __device__ static void issue_s(float (&s)[kAcc], const uint32_t (&qr)[kD / 16][4], uint32_t kb) {
        const uint64_t db0 = smem_desc(kb, 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk) {
            const uint64_t db = desc_add(db0, (kk / 4) * kHalfBytes + (kk % 4) * 32);
            wgmma::rs_bf16_n64(s, qr[kk][0], qr[kk][1], qr[kk][2], qr[kk][3], db, kk > 0 ? 1u : 0u);
        }
        wgmma_commit();
    }
    __device__ static void issue_pv(float (&o)[kD / 2], const uint32_t (&p)[kK16][4], uint32_t vb) {
        // B = V[16 keys][128], MN-major: 64-column halves kHalfBytes apart, 8-key groups 1024 B apart.
        const uint64_t db0 = smem_desc(vb, kHalfBytes, 1024);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kK16; ++kk)
            wgmma::rs_bf16_n128_tb(o, p[kk][0], p[kk][1], p[kk][2], p[kk][3], desc_add(db0, kk * 2048), 1u);
        wgmma_commit();
    }
    __device__ static void fence_p(uint32_t (&p)[kK16][4]) {
#pragma unroll
        for (int kk = 0; kk < kK16; ++kk) fence_regs(p[kk]);
    }
    // Masks keys at or past `valid` (kMask), updates the running max / sum, leaves P in s. Row i of this
    // thread holds columns 8·jj + 2·t + e at s[4·jj + 2·i + e].
    template <bool kFirst, bool kMask>
    __device__ static void softmax(float (&s)[kAcc], int valid, float sl2, float (&m)[2], float (&l)[2],
                                   float (&corr)[2]) {
        const int t = threadIdx.x % 4;
        if constexpr (kMask) {
            const int lim = valid - 2 * t;
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int jj = 0; jj < kRows / 8; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        if (8 * jj + e >= lim) s[4 * jj + 2 * i + e] = -INFINITY;
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            float mx = m[i];
#pragma unroll
            for (int jj = 0; jj < kRows / 8; ++jj)
                mx = fmaxf(mx, fmaxf(s[4 * jj + 2 * i], s[4 * jj + 2 * i + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float use = mx == -INFINITY ? 0.0f : mx;
            corr[i] = kFirst ? 1.0f : ex2((m[i] - use) * sl2);
            m[i] = mx;
            const float msl = use * sl2;
            float sum = 0.0f;
#pragma unroll
            for (int jj = 0; jj < kRows / 8; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float& x = s[4 * jj + 2 * i + e];
                    x = ex2(fmaf(x, sl2, -msl));
                    sum += x;
                }
            l[i] = kFirst ? sum : l[i] * corr[i] + sum;
        }
    }
    __device__ static void pack_p(const float (&s)[kAcc], uint32_t (&p)[kK16][4]) {
#pragma unroll
        for (int kk = 0; kk < kK16; ++kk) {
            p[kk][0] = pack_bf16(s[8 * kk + 0], s[8 * kk + 1]);
            p[kk][1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
            p[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
            p[kk][3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
        }
    }
};
#endif // H3_SM90A

struct BsaArgs {
    const int32_t* slot_rows;  // [tiles·64]
    const int32_t* tile_sizes; // [tiles]
    const int32_t* lists;      // [H, tiles − prefix, width]
    int heads, tiles, prefix, width;
    // The fused gate add (HopperBlockSparseArgs::gate): null gate for none.
    const bf16* gate; // [rows, H, 128]
    const float* oc;  // [H, tiles, 128]
    bool gate_round;
};

#ifdef H3_SM90A
__device__ __forceinline__ float bf16_lo(uint32_t x) {
    return __uint_as_float(x << 16);
}
__device__ __forceinline__ float bf16_hi(uint32_t x) {
    return __uint_as_float(x & 0xffff0000u);
}

// Both kernels' epilogue for one output row: this thread's half i of the accumulator (o[4·jj + 2·i + e] is
// column 8·jj + 2·t + e) times inv, rounded to bf16 and stored at packed row `row`, head h. With the fused
// gate add (a.gate) the rounded value then gets vsa_gate_add's formula with oc of the query tile qt (the
// row's tile) and the row's gate, so the bytes are those of this kernel followed by ops::vsa_gate_add.
__device__ __forceinline__ void store_row(bf16* __restrict__ out, const float (&o)[kD / 2], int i, float inv,
                                          const BsaArgs& a, int32_t row, int h, int qt) {
    const int t = threadIdx.x % 4;
    const int64_t off = (static_cast<int64_t>(row) * a.heads + h) * kD + 2 * t;
    bf16* dst = out + off;
    if (a.gate == nullptr) {
#pragma unroll
        for (int jj = 0; jj < kD / 8; ++jj)
            *reinterpret_cast<uint32_t*>(dst + 8 * jj) =
                pack_bf16(o[4 * jj + 2 * i] * inv, o[4 * jj + 2 * i + 1] * inv);
        return;
    }
    const bf16* g = a.gate + off;
    const float* c = a.oc + (static_cast<int64_t>(h) * a.tiles + qt) * kD + 2 * t;
#pragma unroll
    for (int jj = 0; jj < kD / 8; ++jj) {
        const uint32_t att = pack_bf16(o[4 * jj + 2 * i] * inv, o[4 * jj + 2 * i + 1] * inv); // as stored
        const uint32_t gg = *reinterpret_cast<const uint32_t*>(g + 8 * jj);
        const float2 cc = *reinterpret_cast<const float2*>(c + 8 * jj);
        const float lo = vsa_gate_add_one<bf16>(bf16_lo(att), cc.x, bf16_lo(gg), a.gate_round);
        const float hi = vsa_gate_add_one<bf16>(bf16_hi(att), cc.y, bf16_hi(gg), a.gate_round);
        *reinterpret_cast<uint32_t*>(dst + 8 * jj) = pack_bf16(lo, hi);
    }
}
#endif // H3_SM90A

template <int kStages>
__global__ void __launch_bounds__(kThreads, 2)
    bsa_bf16_sm90(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                  const __grid_constant__ CUtensorMap tv, bf16* __restrict__ out, const BsaArgs a,
                  float sl2) {
#ifdef H3_SM90A
    using C = Consumer;
    extern __shared__ uint8_t smem_raw[];
    SmemBsa<kStages>& sm = *reinterpret_cast<SmemBsa<kStages>*>(
        (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    const int wg = threadIdx.x / 128;
    const int qt = blockIdx.x, h = blockIdx.y; // query tiles fastest: CTAs in flight share a head's K/V in L2
    const bool dense = qt < a.prefix;
    const int32_t* list =
        dense ? nullptr
              : a.lists + (static_cast<int64_t>(h) * (a.tiles - a.prefix) + (qt - a.prefix)) * a.width;
    const int count = dense ? a.tiles : a.width;
    // Key tile of step j; −1 for an out-of-range entry.
    auto key_tile = [&](int j) -> int {
        if (dense) return j;
        const int t = list[j];
        return t >= 0 && t < a.tiles ? t : -1;
    };

    if (threadIdx.x == 0) {
        mbar_init(smem_u32(&sm.q_full), 1);
        for (int s = 0; s < kStages; ++s) {
            mbar_init(smem_u32(&sm.k_full[s]), 1);
            mbar_init(smem_u32(&sm.v_full[s]), 1);
            mbar_init(smem_u32(&sm.k_empty[s]), 4); // one arrival per consumer warp
            mbar_init(smem_u32(&sm.v_empty[s]), 4);
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
            mbar_expect_tx(qf, 2 * kHalfBytes);
            tma_load_3d(smem_u32(sm.q[0]), &tq, qf, 0, h, qt * kRows);
            tma_load_3d(smem_u32(sm.q[1]), &tq, qf, 64, h, qt * kRows);
            for (int j = 0; j < count; ++j) {
                const int st = j % kStages;
                const uint32_t ph = (j / kStages) & 1;
                const int kt = max(key_tile(j), 0);
                const uint32_t kf = smem_u32(&sm.k_full[st]), vf = smem_u32(&sm.v_full[st]);
                if (j >= kStages) mbar_wait(smem_u32(&sm.k_empty[st]), ph ^ 1);
                mbar_expect_tx(kf, 2 * kHalfBytes);
                tma_load_3d(smem_u32(sm.k[st][0]), &tk, kf, 0, h, kt * kRows);
                tma_load_3d(smem_u32(sm.k[st][1]), &tk, kf, 64, h, kt * kRows);
                if (j >= kStages) mbar_wait(smem_u32(&sm.v_empty[st]), ph ^ 1);
                mbar_expect_tx(vf, 2 * kHalfBytes);
                tma_load_3d(smem_u32(sm.v[st][0]), &tv, vf, 0, h, kt * kRows);
                tma_load_3d(smem_u32(sm.v[st][1]), &tv, vf, 64, h, kt * kRows);
            }
        }
        return;
    }

    // ---- consumer
    regs_alloc<232>();
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const bool elect = lane == 0;
    // Valid keys of step j's tile (0: an out-of-range entry, every key masked).
    auto valid_of = [&](int j) -> int {
        const int kt = key_tile(j);
        return kt >= 0 ? a.tile_sizes[kt] : 0;
    };
    float o[kD / 2];
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
    float s[C::kAcc];
    uint32_t p[C::kK16][4], p2[C::kK16][4];
    uint32_t qr[kD / 16][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2];
    int valid = valid_of(0);

    mbar_wait(smem_u32(&sm.q_full), 0);
    C::load_q(qr, smem_u32(sm.q[0]));
    mbar_wait(smem_u32(&sm.k_full[0]), 0);
    C::issue_s(s, qr, smem_u32(sm.k[0][0]));
    const int valid_next0 = count > 1 ? valid_of(1) : kRows;
    wgmma_wait<0>();
    fence_regs(s);
    if (elect) mbar_arrive(smem_u32(&sm.k_empty[0]));
    if (valid < kRows)
        C::softmax<true, true>(s, valid, sl2, m, l, corr);
    else
        C::softmax<true, false>(s, valid, sl2, m, l, corr);
    C::pack_p(s, p);
    valid = valid_next0;

    // Block j's S GEMM with block j−1's P·V (P in pin); block j's P goes to pout. `valid` is block j's.
    auto step = [&](int j, auto& pin, auto& pout) {
        const int st = j % kStages, pst = (j - 1) % kStages;
        mbar_wait(smem_u32(&sm.k_full[st]), (j / kStages) & 1);
        mbar_wait(smem_u32(&sm.v_full[pst]), ((j - 1) / kStages) & 1);
        C::issue_s(s, qr, smem_u32(sm.k[st][0]));
        C::issue_pv(o, pin, smem_u32(sm.v[pst][0]));
        const int valid_next = j + 1 < count ? valid_of(j + 1) : kRows; // read while the GEMMs run
        wgmma_wait<1>(); // S of block j done; P·V of block j−1 may still run
        fence_regs(s);
        if (elect) mbar_arrive(smem_u32(&sm.k_empty[st]));
        if (valid < kRows)
            C::softmax<false, true>(s, valid, sl2, m, l, corr);
        else
            C::softmax<false, false>(s, valid, sl2, m, l, corr);
        C::pack_p(s, pout);
        wgmma_wait<0>();
        fence_regs(o);
        C::fence_p(pin);
        if (elect) mbar_arrive(smem_u32(&sm.v_empty[pst]));
        // corr is exactly 1 for a row whose max did not move.
        if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
            for (int jj = 0; jj < kD / 8; ++jj)
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    o[4 * jj + 2 * i] *= corr[i];
                    o[4 * jj + 2 * i + 1] *= corr[i];
                }
        }
        valid = valid_next;
    };
    auto last_pv = [&](auto& pin) {
        const int lst = (count - 1) % kStages;
        mbar_wait(smem_u32(&sm.v_full[lst]), ((count - 1) / kStages) & 1);
        C::issue_pv(o, pin, smem_u32(sm.v[lst][0]));
        wgmma_wait<0>();
        fence_regs(o);
        C::fence_p(pin);
        if (elect) mbar_arrive(smem_u32(&sm.v_empty[lst]));
    };
    int j = 1;
    for (; j + 1 < count; j += 2) {
        step(j, p, p2);
        step(j + 1, p2, p);
    }
    if (j < count) {
        step(j, p, p2);
        last_pv(p2);
    } else {
        last_pv(p);
    }

    // epilogue: row sums across the quad, normalize, store the valid rows at their packed rows (+ the gate
    // add)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        float sum = l[i];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        const int32_t row = a.slot_rows[qt * kRows + warp * 16 + lane / 4 + 8 * i];
        if (row < 0) continue;
        store_row(out, o, i, inv, a, row, h, qt);
    }
#endif // H3_SM90A
}

// ---- fp8
// ---------------------------------------------------------------------------------------------------
constexpr int kPBias = kFp8AttnPBias;
constexpr int kFp8Tile = kRows * 128; // a q8 / k8 / Vᵀ tile: 8 KB

__device__ __forceinline__ uint32_t pack4_e4m3_rn(float a, float b, float c, float d) {
    const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// Per head the max |x| of k (blockIdx.y 0) and v (1) over 64 packed rows per block, as float bits (atomicMax
// on non-negative floats' bits orders them as floats); amax_bits [2, H] zeroed by the caller.
__global__ void __launch_bounds__(256)
    bsa_fp8_amax_kernel(const bf16* __restrict__ k, const bf16* __restrict__ v, int* __restrict__ amax_bits,
                        int64_t rows, int heads) {
    extern __shared__ int head_max[]; // [heads]
    for (int h = threadIdx.x; h < heads; h += blockDim.x) head_max[h] = 0;
    __syncthreads();
    const bf16* x = blockIdx.y ? v : k;
    const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
    const int64_t chunks_per_row = static_cast<int64_t>(heads) * (kD / 8);
    const int64_t n = min(static_cast<int64_t>(kRows), rows - r0) * chunks_per_row;
    const uint4* src = reinterpret_cast<const uint4*>(x + r0 * heads * kD);
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        const uint4 raw = src[e];
        const bf16* b = reinterpret_cast<const bf16*>(&raw);
        float m = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(__bfloat162float(b[i])));
        atomicMax(&head_max[(e % chunks_per_row) / (kD / 8)], static_cast<int>(fp8_float_bits(m)));
    }
    __syncthreads();
    for (int h = threadIdx.x; h < heads; h += blockDim.x)
        atomicMax(amax_bits + blockIdx.y * heads + h, head_max[h]);
}

// Block (head h, tile t, tensor z): z 0 — q8 rows of the tile with the tile's own scale (written to
// q_scale[h, t]); z 1 — k8 rows with the head's scale; z 2 — the tile's Vᵀ [128 d][64 keys] (keys permuted
// within 32-key groups) with the head's scale. q8 / k8 [tiles·64, H, 128] bytes, vt [H, tiles, 128, 64]. Pad
// slots are zeros.
__global__ void __launch_bounds__(256)
    bsa_fp8_quant_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                         uint8_t* __restrict__ q8, uint8_t* __restrict__ k8, uint8_t* __restrict__ vt,
                         float* __restrict__ q_scale, const int* __restrict__ amax_bits,
                         const int32_t* __restrict__ slot_rows, int heads, int tiles) {
    __shared__ bf16 tile[kRows][kD];
    __shared__ float red[8];
    const int h = blockIdx.x, t = blockIdx.y, z = blockIdx.z;
    const bf16* x = z == 0 ? q : (z == 1 ? k : v);
    // thread: 16-byte chunk c of slots r + 16·i (i < 4)
    const int c = threadIdx.x % 16, r = threadIdx.x / 16;
    uint4 raw[4];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int slot = r + 16 * i;
        const int32_t row = slot_rows[t * kRows + slot];
        raw[i] = row >= 0
                     ? reinterpret_cast<const uint4*>(x + (static_cast<int64_t>(row) * heads + h) * kD)[c]
                     : make_uint4(0, 0, 0, 0);
        const bf16* b = reinterpret_cast<const bf16*>(&raw[i]);
#pragma unroll
        for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(__bfloat162float(b[e])));
    }
    float sc;
    if (z == 0) {
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = amax;
        __syncthreads();
        float mx = red[0];
        for (int w = 1; w < 8; ++w) mx = fmaxf(mx, red[w]);
        sc = fp8_block_scale(mx);
        if (threadIdx.x == 0) q_scale[h * tiles + t] = sc;
    } else {
        sc = fp8_block_scale(fp8_bits_float(static_cast<uint32_t>(amax_bits[(z - 1) * heads + h])));
    }
    const float inv = 1.0f / sc; // exact: a power of two
    if (z < 2) {
        uint8_t* dst = z == 0 ? q8 : k8;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int slot = r + 16 * i;
            const bf16* b = reinterpret_cast<const bf16*>(&raw[i]);
            uint2 out;
            out.x = pack4_e4m3_rn(__bfloat162float(b[0]) * inv, __bfloat162float(b[1]) * inv,
                                  __bfloat162float(b[2]) * inv, __bfloat162float(b[3]) * inv);
            out.y = pack4_e4m3_rn(__bfloat162float(b[4]) * inv, __bfloat162float(b[5]) * inv,
                                  __bfloat162float(b[6]) * inv, __bfloat162float(b[7]) * inv);
            reinterpret_cast<uint2*>(dst + ((static_cast<int64_t>(t) * kRows + slot) * heads + h) * kD)[c] =
                out;
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) reinterpret_cast<uint4*>(&tile[r + 16 * i][0])[c] = raw[i];
    __syncthreads();
    const int d = threadIdx.x / 2, half = threadIdx.x % 2; // Vᵀ row d, keys 32·half .. 32·half + 31
    float f[32];
#pragma unroll
    for (int p = 0; p < 32; ++p) f[p] = __bfloat162float(tile[32 * half + fp8_attention_key_of(p)][d]) * inv;
    uint4 out0, out1;
    out0.x = pack4_e4m3_rn(f[0], f[1], f[2], f[3]);
    out0.y = pack4_e4m3_rn(f[4], f[5], f[6], f[7]);
    out0.z = pack4_e4m3_rn(f[8], f[9], f[10], f[11]);
    out0.w = pack4_e4m3_rn(f[12], f[13], f[14], f[15]);
    out1.x = pack4_e4m3_rn(f[16], f[17], f[18], f[19]);
    out1.y = pack4_e4m3_rn(f[20], f[21], f[22], f[23]);
    out1.z = pack4_e4m3_rn(f[24], f[25], f[26], f[27]);
    out1.w = pack4_e4m3_rn(f[28], f[29], f[30], f[31]);
    uint4* dst =
        reinterpret_cast<uint4*>(vt + ((static_cast<int64_t>(h) * tiles + t) * kD + d) * kRows + 32 * half);
    dst[0] = out0;
    dst[1] = out1;
}

template <int kStages> struct SmemBsaFp8 {
    uint8_t q[kFp8Tile];          // [slot][128 B], 128-byte swizzled
    uint8_t k[kStages][kFp8Tile]; // [key slot][128 B], 128-byte swizzled
    uint8_t v[kStages][kFp8Tile]; // Vᵀ [d][64 keys], 64-byte swizzled
    uint64_t q_full, k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
};

#ifdef H3_SM90A
struct Fp8Consumer {
    static constexpr int kAcc = kRows / 2;     // S registers per thread (m64n64)
    static constexpr int kPSteps = kRows / 32; // P·V k-steps (32 keys each)

    // This warp's A fragments of Q (its 16 rows) from the 128-byte-swizzled tile at qa: per 32-byte k-step,
    // rows g / g + 8 at bytes 4t..4t+3 and 16+4t..16+4t+3.
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
    __device__ static void issue_s(float (&s)[kAcc], const uint32_t (&qr)[4][4], uint32_t kb) {
        const uint64_t db0 = smem_desc(kb, 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wgmma::rs_e4m3_n64(s, qr[kk][0], qr[kk][1], qr[kk][2], qr[kk][3], desc_add(db0, kk * 32),
                               kk > 0 ? 1u : 0u);
        wgmma_commit();
    }
    __device__ static void issue_pv(float (&o)[64], const uint32_t (&p)[kPSteps][4], uint32_t vb) {
        const uint64_t db0 = smem_desc_sw64(vb, 16, 512);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kPSteps; ++kk)
            wgmma::rs_e4m3_n128(o, p[kk][0], p[kk][1], p[kk][2], p[kk][3], desc_add(db0, kk * 32), 1u);
        wgmma_commit();
    }
    __device__ static void fence_p(uint32_t (&p)[kPSteps][4]) {
#pragma unroll
        for (int kk = 0; kk < kPSteps; ++kk) fence_regs(p[kk]);
    }
    // sl2: the score multiplier (scales · softmax scale · log2 e); m in the log2 domain. Masks keys at or
    // past `valid` (kMask), leaves P = 2^(x − m + kPBias) in s.
    template <bool kFirst, bool kMask>
    __device__ static void softmax(float (&s)[kAcc], int valid, float sl2, float (&m)[2], float (&l)[2],
                                   float (&corr)[2]) {
        constexpr int kGroups = kRows / 8;
        const int t = threadIdx.x % 4;
        if constexpr (kMask) {
            const int lim = valid - 2 * t;
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int jj = 0; jj < kGroups; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        if (8 * jj + e >= lim) s[4 * jj + 2 * i + e] = -INFINITY;
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
    // e4m3 A fragments (k = 32 per step): positions 4t..4t+3 take keys 2t, 2t+1, 8+2t, 9+2t of the step's
    // first 16 keys (the Vᵀ copy stores keys in that order), rows g and g + 8.
    __device__ static void pack_p(const float (&s)[kAcc], uint32_t (&p)[kPSteps][4]) {
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

struct Fp8Scales {
    const float* q;       // [H, tiles]
    const int* amax_bits; // [2, H]: k, v
};

template <int kStages>
__global__ void __launch_bounds__(kThreads, 2)
    bsa_fp8_sm90(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                 const __grid_constant__ CUtensorMap tv, bf16* __restrict__ out, const BsaArgs a,
                 const Fp8Scales sc, float scale_log2) {
#ifdef H3_SM90A
    using C = Fp8Consumer;
    extern __shared__ uint8_t smem_raw[];
    SmemBsaFp8<kStages>& sm = *reinterpret_cast<SmemBsaFp8<kStages>*>(
        (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    const int wg = threadIdx.x / 128;
    const int qt = blockIdx.x, h = blockIdx.y; // query tiles fastest: CTAs in flight share a head's K/V in L2
    const bool dense = qt < a.prefix;
    const int32_t* list =
        dense ? nullptr
              : a.lists + (static_cast<int64_t>(h) * (a.tiles - a.prefix) + (qt - a.prefix)) * a.width;
    const int count = dense ? a.tiles : a.width;
    auto key_tile = [&](int j) -> int {
        if (dense) return j;
        const int t = list[j];
        return t >= 0 && t < a.tiles ? t : -1;
    };

    if (threadIdx.x == 0) {
        mbar_init(smem_u32(&sm.q_full), 1);
        for (int s = 0; s < kStages; ++s) {
            mbar_init(smem_u32(&sm.k_full[s]), 1);
            mbar_init(smem_u32(&sm.v_full[s]), 1);
            mbar_init(smem_u32(&sm.k_empty[s]), 4);
            mbar_init(smem_u32(&sm.v_empty[s]), 4);
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
            mbar_expect_tx(qf, kFp8Tile);
            tma_load_3d(smem_u32(sm.q), &tq, qf, 0, h, qt * kRows);
            for (int j = 0; j < count; ++j) {
                const int st = j % kStages;
                const uint32_t ph = (j / kStages) & 1;
                const int kt = max(key_tile(j), 0);
                const uint32_t kf = smem_u32(&sm.k_full[st]), vf = smem_u32(&sm.v_full[st]);
                if (j >= kStages) mbar_wait(smem_u32(&sm.k_empty[st]), ph ^ 1);
                mbar_expect_tx(kf, kFp8Tile);
                tma_load_3d(smem_u32(sm.k[st]), &tk, kf, 0, h, kt * kRows);
                if (j >= kStages) mbar_wait(smem_u32(&sm.v_empty[st]), ph ^ 1);
                mbar_expect_tx(vf, kFp8Tile);
                tma_load_3d(smem_u32(sm.v[st]), &tv, vf, 0, 0, h * a.tiles + kt);
            }
        }
        return;
    }

    // ---- consumer
    regs_alloc<232>();
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const bool elect = lane == 0;
    auto valid_of = [&](int j) -> int {
        const int kt = key_tile(j);
        return kt >= 0 ? a.tile_sizes[kt] : 0;
    };
    const float k_scale = fp8_block_scale(fp8_bits_float(static_cast<uint32_t>(sc.amax_bits[h])));
    const float v_scale = fp8_block_scale(fp8_bits_float(static_cast<uint32_t>(sc.amax_bits[a.heads + h])));
    const float sl2 = sc.q[h * a.tiles + qt] * k_scale * scale_log2;
    float o[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.0f;
    float s[C::kAcc];
    uint32_t p[C::kPSteps][4], p2[C::kPSteps][4];
    uint32_t qr[4][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2];
    int valid = valid_of(0);

    mbar_wait(smem_u32(&sm.q_full), 0);
    C::load_q(qr, smem_u32(sm.q));
    mbar_wait(smem_u32(&sm.k_full[0]), 0);
    C::issue_s(s, qr, smem_u32(sm.k[0]));
    const int valid_next0 = count > 1 ? valid_of(1) : kRows;
    wgmma_wait<0>();
    fence_regs(s);
    if (elect) mbar_arrive(smem_u32(&sm.k_empty[0]));
    if (valid < kRows)
        C::softmax<true, true>(s, valid, sl2, m, l, corr);
    else
        C::softmax<true, false>(s, valid, sl2, m, l, corr);
    C::pack_p(s, p);
    valid = valid_next0;

    // As the bf16 kernel: block j's S with block j−1's P·V, P in alternating register sets.
    auto step = [&](int j, auto& pin, auto& pout) {
        const int st = j % kStages, pst = (j - 1) % kStages;
        mbar_wait(smem_u32(&sm.k_full[st]), (j / kStages) & 1);
        mbar_wait(smem_u32(&sm.v_full[pst]), ((j - 1) / kStages) & 1);
        C::issue_s(s, qr, smem_u32(sm.k[st]));
        C::issue_pv(o, pin, smem_u32(sm.v[pst]));
        const int valid_next = j + 1 < count ? valid_of(j + 1) : kRows;
        wgmma_wait<1>();
        fence_regs(s);
        if (elect) mbar_arrive(smem_u32(&sm.k_empty[st]));
        if (valid < kRows)
            C::softmax<false, true>(s, valid, sl2, m, l, corr);
        else
            C::softmax<false, false>(s, valid, sl2, m, l, corr);
        C::pack_p(s, pout);
        wgmma_wait<0>();
        fence_regs(o);
        C::fence_p(pin);
        if (elect) mbar_arrive(smem_u32(&sm.v_empty[pst]));
        if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
            for (int jj = 0; jj < 16; ++jj)
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    o[4 * jj + 2 * i] *= corr[i];
                    o[4 * jj + 2 * i + 1] *= corr[i];
                }
        }
        valid = valid_next;
    };
    auto last_pv = [&](auto& pin) {
        const int lst = (count - 1) % kStages;
        mbar_wait(smem_u32(&sm.v_full[lst]), ((count - 1) / kStages) & 1);
        C::issue_pv(o, pin, smem_u32(sm.v[lst]));
        wgmma_wait<0>();
        fence_regs(o);
        C::fence_p(pin);
        if (elect) mbar_arrive(smem_u32(&sm.v_empty[lst]));
    };
    int j = 1;
    for (; j + 1 < count; j += 2) {
        step(j, p, p2);
        step(j + 1, p2, p);
    }
    if (j < count) {
        step(j, p, p2);
        last_pv(p2);
    } else {
        last_pv(p);
    }

    // epilogue: O · (v_scale / 2^kPBias) / l at the valid rows' packed positions (+ the gate add)
    const float out_scale = v_scale / (1 << kPBias);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        float sum = l[i];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = sum > 0.0f ? out_scale / sum : 0.0f;
        const int32_t row = a.slot_rows[qt * kRows + warp * 16 + lane / 4 + 8 * i];
        if (row < 0) continue;
        store_row(out, o, i, inv, a, row, h, qt);
    }
#endif // H3_SM90A
}

// Runs f with std::integral_constant<int, S> for the one-tile kernels' ring depth S (0: kDefaultStages).
template <class F> Status with_stages(int stages, F&& f) {
    switch (stages == 0 ? kDefaultStages : stages) {
    case 2:
        return f(std::integral_constant<int, 2>{});
    case 3:
        return f(std::integral_constant<int, 3>{});
    case 4:
        return f(std::integral_constant<int, 4>{});
    default:
        return invalid_argument("block-sparse attention (wgmma): " + std::to_string(stages) +
                                " K/V stages; the kernel takes 2, 3 or 4");
    }
}

// What both kernels need of the call (the caller has checked the dtype and alignment).
Status check_shape(const HopperBlockSparseArgs& a) {
    if (a.dim != kD)
        return unimplemented("block-sparse attention (wgmma): head dim 128 only, not " +
                             std::to_string(a.dim));
    if (a.tiles < 1 || a.heads < 1 || a.tiles * kRows > (int64_t{1} << 31) - 1 || a.heads > 65535 ||
        a.tiles > 65535 || a.heads * a.tiles > (int64_t{1} << 31) - 1)
        return unimplemented("block-sparse attention (wgmma): " + std::to_string(a.tiles) + " tiles × " +
                             std::to_string(a.heads) + " heads are outside the kernel's grid");
    return ok_status();
}

} // namespace

Status hopper_block_sparse_bf16(const Context& ctx, const HopperBlockSparseArgs& a) {
    if (!hopper_kernels_usable(ctx))
        return unimplemented("block-sparse attention (wgmma): needs an sm_90a build on an H100/H200");
    H3_TRY(check_shape(a));
    const int64_t slots = a.tiles * kRows, row_bytes = a.heads * kD * 2;
    const int64_t bytes = (slots * row_bytes + 255) / 256 * 256;
    H3_ASSIGN_OR_RETURN(void* scratch, ctx.cuda->scratch(static_cast<size_t>(3 * bytes)));
    uint8_t* gq = static_cast<uint8_t*>(scratch);
    uint8_t* gk = gq + bytes;
    uint8_t* gv = gk + bytes;
    cudaStream_t stream = stream_of(ctx);
    bsa_gather_kernel<<<dim3(static_cast<unsigned>(slots), 3), 256, 0, stream>>>(
        static_cast<const uint8_t*>(a.q), static_cast<const uint8_t*>(a.k), static_cast<const uint8_t*>(a.v),
        gq, gk, gv, a.slot_rows, row_bytes);
    H3_TRY(check_launch("bsa_gather_kernel"));
    CUtensorMap tq, tk, tv;
    const TmaDims d{.rank = 3,
                    .dims = {kD, static_cast<uint64_t>(a.heads), static_cast<uint64_t>(slots)},
                    .strides = {kD * 2, static_cast<uint64_t>(row_bytes)},
                    .box = {64, 1, kRows}};
    H3_TRY(make_tensor_map(tq, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, gq, d));
    H3_TRY(make_tensor_map(tk, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, gk, d));
    H3_TRY(make_tensor_map(tv, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, gv, d));
    const BsaArgs args{a.slot_rows,
                       a.tile_sizes,
                       a.lists,
                       static_cast<int>(a.heads),
                       static_cast<int>(a.tiles),
                       static_cast<int>(a.prefix),
                       static_cast<int>(a.width),
                       static_cast<const bf16*>(a.gate),
                       a.gate_oc,
                       a.gate_round};
    return with_stages(a.stages, [&](auto st) {
        constexpr int kSt = decltype(st)::value;
        const size_t smem = sizeof(SmemBsa<kSt>) + 1024;
        H3_CUDA_TRY(cudaFuncSetAttribute(bsa_bf16_sm90<kSt>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)),
                    "cudaFuncSetAttribute(bsa_bf16_sm90)");
        bsa_bf16_sm90<kSt>
            <<<dim3(static_cast<unsigned>(a.tiles), static_cast<unsigned>(a.heads)), kThreads, smem,
               stream>>>(tq, tk, tv, static_cast<bf16*>(a.o), args, a.scale * 1.4426950408889634f);
        return check_launch("bsa_bf16_sm90");
    });
}

Status hopper_block_sparse_fp8(const Context& ctx, const HopperBlockSparseArgs& a) {
    if (!hopper_kernels_usable(ctx))
        return unimplemented("block-sparse fp8 attention: needs an sm_90a build on an H100/H200");
    H3_TRY(check_shape(a));
    const int64_t slots = a.tiles * kRows, row_bytes8 = a.heads * kD; // e4m3 rows: one byte per element
    auto round256 = [](int64_t x) { return (x + 255) / 256 * 256; };
    const int64_t b8 = round256(slots * row_bytes8), qs_bytes = round256(a.heads * a.tiles * 4),
                  amax_bytes = round256(2 * a.heads * 4);
    H3_ASSIGN_OR_RETURN(void* scratch,
                        ctx.cuda->scratch(static_cast<size_t>(3 * b8 + qs_bytes + amax_bytes)));
    uint8_t* q8 = static_cast<uint8_t*>(scratch);
    uint8_t* k8 = q8 + b8;
    uint8_t* vt = k8 + b8;
    float* qs = reinterpret_cast<float*>(vt + b8);
    int* amax = reinterpret_cast<int*>(reinterpret_cast<uint8_t*>(qs) + qs_bytes);
    cudaStream_t stream = stream_of(ctx);
    H3_CUDA_TRY(cudaMemsetAsync(amax, 0, static_cast<size_t>(2 * a.heads) * 4, stream),
                "cudaMemsetAsync(amax)");
    const bf16* q = static_cast<const bf16*>(a.q);
    const bf16* k = static_cast<const bf16*>(a.k);
    const bf16* v = static_cast<const bf16*>(a.v);
    bsa_fp8_amax_kernel<<<dim3(static_cast<unsigned>((a.rows + kRows - 1) / kRows), 2), 256,
                          static_cast<size_t>(a.heads) * 4, stream>>>(k, v, amax, a.rows,
                                                                      static_cast<int>(a.heads));
    H3_TRY(check_launch("bsa_fp8_amax_kernel"));
    bsa_fp8_quant_kernel<<<dim3(static_cast<unsigned>(a.heads), static_cast<unsigned>(a.tiles), 3), 256, 0,
                           stream>>>(q, k, v, q8, k8, vt, qs, amax, a.slot_rows, static_cast<int>(a.heads),
                                     static_cast<int>(a.tiles));
    H3_TRY(check_launch("bsa_fp8_quant_kernel"));
    CUtensorMap tq, tk, tv;
    const TmaDims drows{.rank = 3,
                        .dims = {kD, static_cast<uint64_t>(a.heads), static_cast<uint64_t>(slots)},
                        .strides = {kD, static_cast<uint64_t>(row_bytes8)},
                        .box = {128, 1, kRows}};
    const TmaDims dv{.rank = 3,
                     .dims = {kRows, kD, static_cast<uint64_t>(a.heads * a.tiles)},
                     .strides = {kRows, kRows * kD},
                     .box = {kRows, kD, 1},
                     .swizzle = CU_TENSOR_MAP_SWIZZLE_64B};
    H3_TRY(make_tensor_map(tq, CU_TENSOR_MAP_DATA_TYPE_UINT8, q8, drows));
    H3_TRY(make_tensor_map(tk, CU_TENSOR_MAP_DATA_TYPE_UINT8, k8, drows));
    H3_TRY(make_tensor_map(tv, CU_TENSOR_MAP_DATA_TYPE_UINT8, vt, dv));
    const BsaArgs args{a.slot_rows,
                       a.tile_sizes,
                       a.lists,
                       static_cast<int>(a.heads),
                       static_cast<int>(a.tiles),
                       static_cast<int>(a.prefix),
                       static_cast<int>(a.width),
                       static_cast<const bf16*>(a.gate),
                       a.gate_oc,
                       a.gate_round};
    return with_stages(a.stages, [&](auto st) {
        constexpr int kSt = decltype(st)::value;
        const size_t smem = sizeof(SmemBsaFp8<kSt>) + 1024;
        H3_CUDA_TRY(cudaFuncSetAttribute(bsa_fp8_sm90<kSt>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)),
                    "cudaFuncSetAttribute(bsa_fp8_sm90)");
        bsa_fp8_sm90<kSt><<<dim3(static_cast<unsigned>(a.tiles), static_cast<unsigned>(a.heads)), kThreads,
                            smem, stream>>>(tq, tk, tv, static_cast<bf16*>(a.o), args, Fp8Scales{qs, amax},
                                            a.scale * 1.4426950408889634f);
        return check_launch("bsa_fp8_sm90");
    });
}

} // namespace h3::ops::cuda_detail
