// bf16 flash attention for Hopper (sm_90a), head dim 64 or 128, in the FlashAttention-3 manner:
//  - one CTA per (128-query tile, head, batch item): 3 warpgroups. Warpgroup 0 is the producer (one
//    thread issues the TMA loads; the warpgroup gives its registers away with setmaxnreg); warpgroups 1 and
//    2 are consumers, 64 query rows each, sharing every K/V tile.
//  - Q is loaded once; K and V tiles go through a 2-stage ring, each stage with a "full" mbarrier (TMA bytes
//    landed) and an "empty" one (both consumers' warps done reading).
//  - S = Q·Kᵀ and O += P·V run on wgmma: Q, K from shared memory (K-major), P from registers, V from shared
//    memory read MN-major (transposed by the descriptor, no data movement).
//  - Intra-warpgroup overlap: block j's S GEMM and block j-1's P·V GEMM are issued together; softmax of
//    block j runs while P·V of j-1 is still on the tensor cores. Optionally (pingpong) the two consumers take
//    turns issuing their GEMMs through named barriers, so one's softmax overlaps the other's GEMMs.
//  - Online softmax in fp32 with exp2 (scores pre-multiplied by scale·log2 e), per-thread partial row sums
//    reduced across the quad only at the end; O rescaled after each P·V.
// Tiles past Sq / Sk read zeros (TMA bounds); keys past Sk and, when causal, keys after the query are
// masked to -inf; rows past Sq are not stored. Grouped-query attention maps head h to kv head h / (H/Hkv).
// Head dim 64: Q and each K/V stage are one 128-byte-swizzled 64-column half (128 B per row), S = Q·Kᵀ is
// 4 k16 steps, O += P·V an n = 64 wgmma, O 32 fp32 registers per thread.
// Batched (kBatched): the tensor maps are rank 4 {D, H, S, B}, so TMA reads zeros past each item's end;
// grid.z is the item, and item b's query rows are stored at rows b·Sq + row of o. The unbatched
// instantiations (the DiT's head dim 128) keep rank-3 maps and unbatched addressing.
#include "ops/cuda/attention_hopper.h"
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/hopper_common.cuh"
#include "ops/cuda/wgmma_ops.cuh"

#include <string>
#include <type_traits>

namespace h3::ops::cuda_detail {

namespace {

constexpr int kBlockM = 128; // query rows per CTA (2 consumer warpgroups x 64)
constexpr int kThreads = 384;
constexpr int kHalfBytes = 128 * 128; // one 64-column half of a 128-row bf16 tile (128 B per row)

template <int kD, int BN, int kStages> struct SmemBf16 {
    static constexpr int kHalves = kD / 64;
    uint8_t q[kHalves][kHalfBytes];        // [column half][row][128 B], 128-byte swizzled
    uint8_t k[kStages][kHalves][BN * 128]; // [stage][column half][key row][128 B]
    uint8_t v[kStages][kHalves][BN * 128];
    uint64_t q_full, k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
};

#ifdef H3_SM90A
using namespace sm90;

// One box of a rank-4 tensor map (the batched kernels' {D, H, S, B}) into shared memory.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0,
                                            int c1, int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
        "%4, %5, %6}], [%2];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
        : "memory");
}

template <int kD, int BN> struct Consumer {
    static constexpr int kAcc = BN / 2;  // S registers per thread
    static constexpr int kK16 = BN / 16; // k16 steps of P·V

    __device__ static void fence_p(uint32_t (&p)[kK16][4]) {
#pragma unroll
        for (int kk = 0; kk < kK16; ++kk) fence_regs(p[kk]);
    }

    __device__ static void issue_s(float (&s)[kAcc], uint32_t qa, uint32_t kb) {
        const uint64_t da0 = smem_desc(qa, 16, 1024), db0 = smem_desc(kb, 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk) {
            const uint32_t half = kk / 4, off = (kk % 4) * 32;
            const uint64_t da = desc_add(da0, half * kHalfBytes + off);
            const uint64_t db = desc_add(db0, half * (BN * 128) + off);
            if constexpr (BN == 128)
                wgmma::ss_bf16_n128(s, da, db, kk > 0 ? 1u : 0u);
            else
                wgmma::ss_bf16_n176(s, da, db, kk > 0 ? 1u : 0u);
        }
        wgmma_commit();
    }

    // The same with Q's A fragments of the first kQSteps k16 steps in registers (head dim 128: qr from
    // load_q), the rest from shared memory; K K-major as before.
    template <int kQSteps>
    __device__ static void issue_s_rq(float (&s)[kAcc], const uint32_t (&qr)[kQSteps][4], uint32_t qa,
                                      uint32_t kb) {
        static_assert(kD == 128 && BN == 128, "Q in registers: head dim 128, BN 128");
        const uint64_t da0 = smem_desc(qa, 16, 1024), db0 = smem_desc(kb, 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk) {
            const uint32_t half = kk / 4, off = (kk % 4) * 32;
            const uint64_t db = desc_add(db0, half * (BN * 128) + off);
            if (kk < kQSteps)
                wgmma::rs_bf16_n128(s, qr[kk][0], qr[kk][1], qr[kk][2], qr[kk][3], db, kk > 0 ? 1u : 0u);
            else
                wgmma::ss_bf16_n128(s, desc_add(da0, half * kHalfBytes + off), db, kk > 0 ? 1u : 0u);
        }
        wgmma_commit();
    }
    // This warp's A fragments of Q (16 of the consumer's 64 rows) from the two 128-byte-swizzled column
    // halves at qa (the first) and qa + kHalfBytes: per k16 step, rows g / g + 8 at columns 2t, 2t + 1 and
    // 8 + 2t, 9 + 2t.
    template <int kQSteps> __device__ static void load_q(uint32_t (&qr)[kQSteps][4], uint32_t qa) {
        const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, g = lane / 4, t = lane % 4;
#pragma unroll
        for (int kk = 0; kk < kQSteps; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int row = warp * 16 + g + 8 * (r & 1), byte = (kk % 4) * 32 + 16 * (r >> 1) + 4 * t;
                const uint32_t addr =
                    qa + (kk / 4) * kHalfBytes + row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15));
                asm volatile("ld.shared.b32 %0, [%1];" : "=r"(qr[kk][r]) : "r"(addr));
            }
    }

    __device__ static void issue_pv(float (&o)[kD / 2], const uint32_t (&p)[kK16][4], uint32_t vb) {
        // B = V[16 keys][kD], MN-major: 64-column halves BN·128 B apart (head dim 128; at 64 there is one),
        // 8-key groups 1024 B apart.
        const uint64_t db0 = smem_desc(vb, BN * 128, 1024);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kK16; ++kk) {
            const uint64_t db = desc_add(db0, kk * 2048);
            if constexpr (kD == 128)
                wgmma::rs_bf16_n128_tb(o, p[kk][0], p[kk][1], p[kk][2], p[kk][3], db, 1u);
            else
                wgmma::rs_bf16_n64_tb(o, p[kk][0], p[kk][1], p[kk][2], p[kk][3], db, 1u);
        }
        wgmma_commit();
    }

    // Masks, updates the running max / sum and leaves P in s (pack_p writes the bf16 A fragments). Row i
    // of this thread is row_base + 8·i; its columns are col_base + 8·jj + 2·t + e.
    template <bool kFirst, bool kMask, bool kCausal>
    __device__ static void softmax(float (&s)[kAcc], int col0, int sk, int row0, float sl2, float (&m)[2],
                                   float (&l)[2], float (&corr)[2]) {
        const int t = threadIdx.x % 4;
        if constexpr (kMask) {
            // Column 8·jj + e (relative to this thread's first, col0 + 2·t) is kept when below `lim`: the
            // comparisons are against constants, so no per-element column index is kept in registers.
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                int lim = sk - col0 - 2 * t;
                if constexpr (kCausal) lim = min(lim, row0 + 8 * i + 1 - col0 - 2 * t);
#pragma unroll
                for (int jj = 0; jj < BN / 8; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        if (8 * jj + e >= lim) s[4 * jj + 2 * i + e] = -INFINITY;
            }
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            float mx = m[i];
#pragma unroll
            for (int jj = 0; jj < BN / 8; ++jj)
                mx = fmaxf(mx, fmaxf(s[4 * jj + 2 * i], s[4 * jj + 2 * i + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float use = mx == -INFINITY ? 0.0f : mx;
            corr[i] = kFirst ? 1.0f : ex2((m[i] - use) * sl2);
            m[i] = mx;
            const float msl = use * sl2;
            float sum = 0.0f;
#pragma unroll
            for (int jj = 0; jj < BN / 8; ++jj)
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

// kD: head dim (64 or 128); kStages: K/V ring depth (2 or 3); kLazy: skip the O rescale in a warp when no
// row's max moved; kBatched: rank-4 maps and grid.z = batch item (sq, sk are per item); kQSteps (head dim
// 128, BN 128; 0 by default): the first kQSteps of S = Q·Kᵀ's 8 k16 steps take Q from registers loaded
// once. With all 8 (32 registers) P lives in one register set, packed after the previous block's P·V has
// completed (two sets and all of Q do not fit the 240 registers); with 4 the two sets stay.
template <int kD, int BN, int kStages, bool kCausal, bool kPingpong, bool kLazy, bool kBatched,
          int kQSteps = 0>
__global__ void __launch_bounds__(kThreads, 1)
    attention_bf16_sm90(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                        const __grid_constant__ CUtensorMap tv, bf16* __restrict__ out,
                        float* __restrict__ lse, int sq, int sk, int heads, int group, float sl2) {
#ifdef H3_SM90A
    using Smem = SmemBf16<kD, BN, kStages>;
    using C = Consumer<kD, BN>;
    constexpr int kHalves = Smem::kHalves;
    extern __shared__ uint8_t smem_raw[];
    Smem& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    const int wg = threadIdx.x / 128;
    const int m_block = kCausal ? static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)
                                : static_cast<int>(blockIdx.x);
    const int h = blockIdx.y, hk = h / group, m0 = m_block * kBlockM;
    const int b = kBatched ? static_cast<int>(blockIdx.z) : 0; // batch item
    // A box at (column c, head hh, row r) of this CTA's item.
    auto load = [&](uint32_t dst, const CUtensorMap* map, uint32_t bar, int c, int hh, int r) {
        if constexpr (kBatched)
            tma_load_4d(dst, map, bar, c, hh, r, b);
        else
            tma_load_3d(dst, map, bar, c, hh, r);
    };
    int n_blocks = (sk + BN - 1) / BN;
    if constexpr (kCausal) n_blocks = min(n_blocks, (m0 + kBlockM + BN - 1) / BN);

    if (threadIdx.x == 0) {
        mbar_init(smem_u32(&sm.q_full), 1);
        for (int s = 0; s < kStages; ++s) {
            mbar_init(smem_u32(&sm.k_full[s]), 1);
            mbar_init(smem_u32(&sm.v_full[s]), 1);
            mbar_init(smem_u32(&sm.k_empty[s]), 8); // one arrival per consumer warp
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
            mbar_expect_tx(qf, kHalves * kHalfBytes);
            // The halves written out: a loop renumbered head dim 128's PTX, and ptxas's allocation with it.
            load(smem_u32(sm.q[0]), &tq, qf, 0, h, m0);
            if constexpr (kHalves == 2) load(smem_u32(sm.q[1]), &tq, qf, 64, h, m0);
            for (int j = 0; j < n_blocks; ++j) {
                const int st = j % kStages;
                const uint32_t ph = (j / kStages) & 1;
                const uint32_t kf = smem_u32(&sm.k_full[st]), vf = smem_u32(&sm.v_full[st]);
                if (j >= kStages) mbar_wait(smem_u32(&sm.k_empty[st]), ph ^ 1);
                mbar_expect_tx(kf, kHalves * BN * 128);
                load(smem_u32(sm.k[st][0]), &tk, kf, 0, hk, j * BN);
                if constexpr (kHalves == 2) load(smem_u32(sm.k[st][1]), &tk, kf, 64, hk, j * BN);
                if (j >= kStages) mbar_wait(smem_u32(&sm.v_empty[st]), ph ^ 1);
                mbar_expect_tx(vf, kHalves * BN * 128);
                load(smem_u32(sm.v[st][0]), &tv, vf, 0, hk, j * BN);
                if constexpr (kHalves == 2) load(smem_u32(sm.v[st][1]), &tv, vf, 64, hk, j * BN);
            }
        }
        return;
    }

    // ---- consumers
    regs_alloc<240>();
    const int cw = wg - 1;                   // consumer 0 or 1
    const int warp = (threadIdx.x / 32) % 4; // warp within the warpgroup
    const int lane = threadIdx.x % 32;
    const bool elect = lane == 0;
    const int row0 = m0 + cw * 64 + warp * 16 + lane / 4; // this thread's first row (the second is +8)
    const uint32_t qa = smem_u32(sm.q[0]) + cw * (64 * 128);
    const int my_bar = 1 + cw, other_bar = 2 - cw;

    float o[kD / 2];
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
    float s[C::kAcc];
    constexpr bool kOneP = kQSteps == kD / 16;
    uint32_t p[C::kK16][4], p2_regs[kOneP ? 1 : C::kK16][4];
    auto& p2 = pick<kOneP>(p, p2_regs);
    uint32_t qr[kQSteps > 0 ? kQSteps : 1][4]; // Q's A fragments (kQSteps > 0)
    auto issue_s = [&](uint32_t kb) {
        if constexpr (kQSteps > 0)
            C::template issue_s_rq<kQSteps>(s, qr, qa, kb);
        else
            C::issue_s(s, qa, kb);
    };
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2];
    // Blocks from first_masked on need masking: the partial last block, and with causal every block that
    // reaches past the tile's first query (BN == kBlockM there, so m0 / BN is exact).
    const int first_masked = kCausal ? m0 / BN : n_blocks - (sk % BN != 0 ? 1 : 0);

    if (kPingpong && cw == 1) named_arrive(1, 256); // consumer 0 issues first
    mbar_wait(smem_u32(&sm.q_full), 0);
    if constexpr (kQSteps > 0) C::template load_q<kQSteps>(qr, qa);

    // block 0: S only
    mbar_wait(smem_u32(&sm.k_full[0]), 0);
    if (kPingpong) named_sync(my_bar, 256);
    issue_s(smem_u32(sm.k[0][0]));
    if (kPingpong) named_arrive(other_bar, 256);
    wgmma_wait<0>();
    fence_regs(s);
    if (elect) mbar_arrive(smem_u32(&sm.k_empty[0]));
    if (first_masked == 0)
        C::template softmax<true, true, kCausal>(s, 0, sk, row0, sl2, m, l, corr);
    else
        C::template softmax<true, false, kCausal>(s, 0, sk, row0, sl2, m, l, corr);
    C::pack_p(s, p);

    // Block j's S GEMM with block j-1's P·V (from pin); block j's probabilities go to pout. pin and pout
    // alternate between two register sets (the loop is unrolled by two), so P of the P·V in flight is
    // never overwritten and ptxas need not serialize the wgmmas. kOneP: one set (pin is pout), packed
    // once the P·V that reads it has completed.
    auto step = [&](auto mask_tag, int j, auto& pin, auto& pout) {
        constexpr bool kMask = decltype(mask_tag)::value;
        const int st = j % kStages, pst = (j - 1) % kStages;
        mbar_wait(smem_u32(&sm.k_full[st]), (j / kStages) & 1);
        mbar_wait(smem_u32(&sm.v_full[pst]), ((j - 1) / kStages) & 1);
        if (kPingpong) named_sync(my_bar, 256);
        issue_s(smem_u32(sm.k[st][0]));
        C::issue_pv(o, pin, smem_u32(sm.v[pst][0]));
        if (kPingpong) named_arrive(other_bar, 256);
        wgmma_wait<1>(); // S of block j done; P·V of block j-1 may still run
        fence_regs(s);
        if (elect) mbar_arrive(smem_u32(&sm.k_empty[st]));
        C::template softmax<false, kMask, kCausal>(s, j * BN, sk, row0, sl2, m, l, corr);
        if constexpr (!kOneP) C::pack_p(s, pout);
        wgmma_wait<0>();
        fence_regs(o);
        C::fence_p(pin);
        if (elect) mbar_arrive(smem_u32(&sm.v_empty[pst]));
        if constexpr (kOneP) C::pack_p(s, pout); // pout is pin: its P·V has completed
        // corr is exactly 1 for a row whose max did not move (most rows once the first blocks are seen).
        if (!kLazy || __any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
            for (int jj = 0; jj < kD / 8; ++jj)
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
        if (kPingpong) named_sync(my_bar, 256);
        C::issue_pv(o, pin, smem_u32(sm.v[lst][0]));
        if (kPingpong && cw == 0) named_arrive(other_bar, 256); // consumer 1 has no later turn to wait for
        wgmma_wait<0>();
        fence_regs(o);
        C::fence_p(pin);
        if (elect) mbar_arrive(smem_u32(&sm.v_empty[lst]));
    };
    // Unmasked pairs first; what is left (at most one unmasked block, then the masked ones) takes the
    // masking path, which is also correct for an unmasked block.
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

    // epilogue: row sums across the quad, normalize, store bf16 pairs
    const int t = lane % 4;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        float sum = l[i];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        const int row = row0 + 8 * i;
        if (row >= sq) continue;
        const int64_t orow = kBatched ? static_cast<int64_t>(b) * sq + row : static_cast<int64_t>(row);
        // ln Σ exp(scale·s) = scale·m + ln(sum): m is the raw score max, the sum is of exp2((s − m)·sl2).
        if (lse && t == 0)
            lse[orow * heads + h] = sum > 0.0f ? (m[i] * sl2 + log2f(sum)) * 0.6931471805599453f : -INFINITY;
        bf16* dst = out + (orow * heads + h) * kD + 2 * t;
#pragma unroll
        for (int jj = 0; jj < kD / 8; ++jj) {
            const uint32_t v = pack_bf16(o[4 * jj + 2 * i] * inv, o[4 * jj + 2 * i + 1] * inv);
            *reinterpret_cast<uint32_t*>(dst + 8 * jj) = v;
        }
    }
#endif // H3_SM90A
}

// Rows per batch item: a.sq / a.batch queries, a.sk / a.batch keys.
template <int kD, int BN, int kStages, bool kCausal, bool kPingpong, bool kLazy, bool kBatched,
          int kQSteps = 0>
Status launch(const Context& ctx, const HopperAttentionArgs& a) {
    const int64_t sq = a.sq / a.batch, sk = a.sk / a.batch;
    CUtensorMap tq, tk, tv;
    // {D, H, S} or, batched, {D, H, S, B}: element strides in bytes for dims 1.., one box = 64 columns of
    // one head over kBlockM query rows / BN key rows.
    const auto dims = [&](int64_t heads, int64_t rows, uint32_t box_rows) {
        TmaDims d{.rank = kBatched ? 4 : 3,
                  .dims = {kD, static_cast<uint64_t>(heads), static_cast<uint64_t>(rows),
                           static_cast<uint64_t>(a.batch)},
                  .strides = {kD * 2, static_cast<uint64_t>(heads) * kD * 2,
                              static_cast<uint64_t>(rows * heads) * kD * 2},
                  .box = {64, 1, box_rows, 1}};
        return d;
    };
    const TmaDims dq = dims(a.heads, sq, kBlockM), dkv = dims(a.kv_heads, sk, BN);
    H3_TRY(make_tensor_map(tq, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a.q, dq));
    H3_TRY(make_tensor_map(tk, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a.k, dkv));
    H3_TRY(make_tensor_map(tv, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a.v, dkv));
    const size_t smem = sizeof(SmemBf16<kD, BN, kStages>) + 1024;
    auto kernel = attention_bf16_sm90<kD, BN, kStages, kCausal, kPingpong, kLazy, kBatched, kQSteps>;
    H3_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute(attention_bf16_sm90)");
    const dim3 grid(static_cast<unsigned>((sq + kBlockM - 1) / kBlockM), static_cast<unsigned>(a.heads),
                    static_cast<unsigned>(kBatched ? a.batch : 1));
    const float sl2 = a.scale * 1.4426950408889634f;
    kernel<<<grid, kThreads, smem, stream_of(ctx)>>>(
        tq, tk, tv, static_cast<bf16*>(a.o), a.lse, static_cast<int>(sq), static_cast<int>(sk),
        static_cast<int>(a.heads), static_cast<int>(a.heads / a.kv_heads), sl2);
    return check_launch("attention_bf16_sm90");
}

} // namespace

Status hopper_attention_bf16(const Context& ctx, const HopperAttentionArgs& a,
                             const HopperAttentionConfig& cfg) {
    if (!hopper_kernels_usable(ctx))
        return unimplemented("Hopper attention: needs an sm_90a build on an H100/H200");
    if (!hopper_attention_shape_ok(a))
        return unimplemented("Hopper attention: unsupported shape or alignment (head dim " +
                             std::to_string(a.dim) + ", batch " + std::to_string(a.batch) + ")");
#ifdef H3_DEV_ONE_VARIANT // faster local compiles while working on the kernel
    if (a.dim == 64) return launch<64, 128, 2, false, true, false, true>(ctx, a);
    return launch<128, 128, 2, false, true, false, false>(ctx, a);
#else
    if (a.dim == 64) {
        // The video VAE decoder's attention (batched tiles, 32 heads): non-causal only, always through the
        // rank-4 maps (batch 1 is one item). The variants the bench compares; anything else runs the default.
        if (cfg.block_n == 176) return launch<64, 176, 2, false, true, false, true>(ctx, a);
        if (!cfg.pingpong) return launch<64, 128, 2, false, false, false, true>(ctx, a);
        return launch<64, 128, 2, false, true, false, true>(ctx, a);
    }
    // Head dim 128, several items: the default configuration (the only one offered for a batch).
    if (a.batch > 1) return launch<128, 128, 2, false, true, false, true>(ctx, a);
    if (a.causal)
        return launch<128, 128, 2, true, true, true, false>(ctx, a); // the text encoder's causal GQA
    // The variants the bench compares (docs/kernels/attention_notes.md); anything else runs the default.
    // (Lazy rescaling with BN = 176 or 3 stages runs out of registers: ptxas serializes its wgmmas.)
    if (cfg.block_n == 176) return launch<128, 176, 2, false, true, false, false>(ctx, a);
    if (!cfg.pingpong) return launch<128, 128, 2, false, false, false, false>(ctx, a);
    if (cfg.stages == 3) return launch<128, 128, 3, false, true, false, false>(ctx, a);
    if (cfg.q_register_steps == 8) return launch<128, 128, 2, false, true, true, false, 8>(ctx, a);
    if (cfg.q_register_steps == 4) return launch<128, 128, 2, false, true, true, false, 4>(ctx, a);
    return cfg.lazy_rescale ? launch<128, 128, 2, false, true, true, false>(ctx, a)
                            : launch<128, 128, 2, false, true, false, false>(ctx, a);
#endif
}

} // namespace h3::ops::cuda_detail
