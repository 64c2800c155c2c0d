// VSA's tile kernels (ops/vsa.h): pooling, tile scores, top-k selection, the compression branch. Pooling sums
// in the CPU reference's order with no fused multiply-add (__fadd_rn), the scores with one correctly rounded
// fused multiply-add per product in channel order (__fmaf_rn; std::fma on the CPU), so both backends produce
// the same bits and the same selection; the selection and the gate add are bit-equal too; the softmax of the
// compression branch uses expf and fused multiply-adds (close to, not bit-equal with, the CPU). The
// block-sparse attention is in vsa_attention.cu.
//
// Cost per DiT block at full width (1344×768×124: S = 38,247 rows, H = 56 heads, D = 128, n = 676 tiles of
// which 660 video, keep 66), with an H100's ~3 TB/s and ~30 T fp32 lane-ops/s (FMUL, FADD or FFMA) as the
// bounds:
//   vsa_pool           reads S·H·D bf16 = 548 MB per input (q, k, and v for the compression) → ~0.18 ms each
//   vsa_tile_scores    H·n²·D = 3.3 G FFMA (3.55 G with the 64×64 blocks' padding to 704) ≈ 0.12 ms;
//                      writes H·n² f32 = 102 MB (~0.03 ms, overlapped); 6,776 blocks in ~6.4 waves of 8 an SM
//                      → expected ~0.15 ms
//   vsa_select         reads H·660·660 f32 = 98 MB (exempt); ≤ ~2,000 warp instructions per (row, head),
//                      36,960 warps → ~0.05–0.08 ms
//   vsa_compress_tiles H·n²·D = 3.3 G FFMA (3.55 G padded) ≈ 0.12 ms; reads the scores three times (max, sum,
//                      the GEMM: 102 MB from DRAM, the rest mostly from L2) with 2·H·n² = 51 M expf, v̄
//                      (19 MB) once per 32 query tiles; 1,232 blocks on 1,056 slots (1.17 waves) → expected
//                      ~0.2 ms
//   vsa_gate_add       reads o and gate, writes o: 3 · 548 MB = 1.64 GB → ~0.55 ms (on the sparse path the
//                      wgmma kernels do it in their epilogue instead: block_sparse_attention's gate_add)
// so ~1.3 ms a block in all, most of it the bytes of pooling and the gate add (the sparse path fuses the
// gate add; only fusing the pooling into the producers of q, k, v would remove the rest).
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/vsa_gate_add.cuh"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kSlots = kVsaTileRows;

bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// ---- pooling ----------------------------------------------------------------------------------------------

// Up to three inputs of one shape pool in one launch (vsa_pool_qkv): blockIdx.z picks the input and its
// [H, tiles, D] block of the output.
constexpr int kPoolMaxInputs = 3;
template <typename T> struct PoolInputs {
    const T* x[kPoolMaxInputs];
    // The input of this block (selected, not indexed: no copy of the parameters to local memory).
    __device__ __forceinline__ const T* of_block() const {
        return blockIdx.z == 0 ? x[0] : (blockIdx.z == 1 ? x[1] : x[2]);
    }
};

// Vector path (D % 8 == 0, 16-byte aligned rows): one block per (tile, chunk of the H·D channels, input),
// each thread 8 consecutive channels of one head, read as one 16-byte load (two for f32) per slot; the tile's
// slots are read 8 at a time (4 for f32: that many loads in flight, kept raw), then summed in slot order as
// the CPU does.
constexpr int kPoolThreads = 128;

template <typename T> struct Raw8 { // 8 elements of T as 16-byte words
    static constexpr int kWords = static_cast<int>(sizeof(T)) / 2;
    uint4 w[kWords];
};

template <typename T>
__global__ void __launch_bounds__(kPoolThreads)
    vsa_pool_vec_kernel(PoolInputs<T> inputs, const int32_t* __restrict__ slot_rows,
                        const int32_t* __restrict__ sizes, float* __restrict__ out_all, uint32_t vecs_per_row,
                        uint32_t vecs_per_head, int64_t row_elems, int64_t d, int64_t tiles) {
    constexpr int kBatch = sizeof(T) == 2 ? 8 : 4;
    __shared__ int32_t rows[kSlots];
    const int64_t t = blockIdx.x;
    for (int s = threadIdx.x; s < kSlots; s += blockDim.x) rows[s] = slot_rows[t * kSlots + s];
    __syncthreads();
    const uint32_t v = blockIdx.y * kPoolThreads + threadIdx.x;
    if (v >= vecs_per_row) return;
    const uint32_t h = v / vecs_per_head, c = (v - h * vecs_per_head) * 8u;
    const T* __restrict__ x = inputs.of_block();
    float* __restrict__ out = out_all + static_cast<int64_t>(blockIdx.z) * (row_elems * tiles);
    const T* col = x + static_cast<int64_t>(v) * 8;
    float sum[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) sum[e] = 0.0f;
    for (int s0 = 0; s0 < kSlots; s0 += kBatch) {
        Raw8<T> raw[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int32_t r = rows[s0 + b];
            if (r < 0) continue;
            const uint4* p = reinterpret_cast<const uint4*>(col + static_cast<int64_t>(r) * row_elems);
#pragma unroll
            for (int k = 0; k < Raw8<T>::kWords; ++k) raw[b].w[k] = p[k];
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            if (rows[s0 + b] < 0) continue; // padding: skipped, as the CPU does
            float val[8];
            load_vec<8>(reinterpret_cast<const T*>(raw[b].w), val);
#pragma unroll
            for (int e = 0; e < 8; ++e) sum[e] = __fadd_rn(sum[e], val[e]);
        }
    }
    const float size = static_cast<float>(sizes[t]);
    float res[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) res[e] = __fdiv_rn(sum[e], size);
    store_vec<8>(out + (static_cast<int64_t>(h) * tiles + t) * d + c, res);
}

// Any D: one block per (tile, head, input), threads over channels.
template <typename T>
__global__ void vsa_pool_kernel(PoolInputs<T> inputs, const int32_t* __restrict__ slot_rows,
                                const int32_t* __restrict__ sizes, float* __restrict__ out_all, int64_t heads,
                                int64_t d, int64_t tiles) {
    const T* __restrict__ x = inputs.of_block();
    float* __restrict__ out = out_all + static_cast<int64_t>(blockIdx.z) * (heads * tiles * d);
    __shared__ int32_t rows[kSlots];
    const int64_t t = blockIdx.x, h = blockIdx.y;
    for (int s = threadIdx.x; s < kSlots; s += blockDim.x) rows[s] = slot_rows[t * kSlots + s];
    __syncthreads();
    const float size = static_cast<float>(sizes[t]);
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
        float sum = 0.0f;
        for (int s = 0; s < kSlots; ++s) {
            const int32_t r = rows[s];
            if (r < 0) continue;
            sum = __fadd_rn(sum, to_f32(x[(static_cast<int64_t>(r) * heads + h) * d + c]));
        }
        out[(h * tiles + t) * d + c] = __fdiv_rn(sum, size);
    }
}

// ---- tile scores ------------------------------------------------------------------------------------------

// A register-tiled fp32 "GEMM" that keeps the CPU's bits: every output is one chain of fused multiply-adds
// over d in channel order, acc = __fmaf_rn(q, k, acc) (std::fma on the CPU: both correctly rounded, so the
// same bits), then one __fdiv_rn by sqrt(D).
//
// One block of 64 threads per 64×64 outputs of a head; thread (tx, ty) = (t & 7, t >> 3) owns 8×8 of them:
// rows ty·4 + {0..3} and 32 + ty·4 + {0..3}, columns tx·4 + {0..3} and 32 + tx·4 + {0..3} — split in two
// halves so the float4 shared loads of each 8-lane phase touch 32 consecutive words (no bank conflict). q̄ and
// k̄ pass through shared memory in chunks of 32 channels, transposed to channel-major (qs[c][row]); per
// channel a thread issues 4 LDS.128 for 64 FFMA. Vec (d % 4 == 0, n % 4 == 0, 16-byte aligned q̄, k̄, scores)
// stages with float4 global loads and stores the outputs as float4 rows; otherwise scalar loads and stores,
// the same arithmetic.
constexpr int kScoreBlock = 64;
constexpr int kScoreChunk = 32;
constexpr int kScoreThreads = 64;

template <bool Vec>
__device__ __forceinline__ void score_stage(const float* __restrict__ src, float (*dst)[kScoreBlock],
                                            int64_t row0, int64_t n, int64_t d, int64_t d0, int len) {
    if constexpr (Vec) {
        // 64 rows × 8 float4 of channels; lanes run over rows, so the transposed stores are conflict-free.
        // (Two loads in flight a step: the 64 accumulators leave few registers.)
#pragma unroll 2
        for (int it = 0; it < kScoreBlock * kScoreChunk / 4 / kScoreThreads; ++it) {
            const int e = it * kScoreThreads + static_cast<int>(threadIdx.x);
            const int r = e % kScoreBlock, c4 = e / kScoreBlock;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (row0 + r < n && c4 * 4 < len)
                v = *reinterpret_cast<const float4*>(src + (row0 + r) * d + d0 + c4 * 4);
            dst[c4 * 4 + 0][r] = v.x;
            dst[c4 * 4 + 1][r] = v.y;
            dst[c4 * 4 + 2][r] = v.z;
            dst[c4 * 4 + 3][r] = v.w;
        }
    } else {
#pragma unroll 4
        for (int it = 0; it < kScoreBlock * kScoreChunk / kScoreThreads; ++it) {
            const int e = it * kScoreThreads + static_cast<int>(threadIdx.x);
            const int r = e % kScoreBlock, c = e / kScoreBlock;
            dst[c][r] = (row0 + r < n && c < len) ? src[(row0 + r) * d + d0 + c] : 0.0f;
        }
    }
}

// acc[r][s] += a[r]·b[s], each product fused into its own chain (one rounding): a thread's 8×8 register tile
// of the scores and the compression. a = (a0, a1), b = (b0, b1) as 4 + 4 consecutive values.
__device__ __forceinline__ void fma_outer_8x8(const float4 a0, const float4 a1, const float4 b0,
                                              const float4 b1, float (&acc)[8][8]) {
    const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int s = 0; s < 8; ++s) acc[r][s] = __fmaf_rn(a[r], b[s], acc[r][s]);
}

// One channel's 64 products of a thread, each fused into its own chain.
__device__ __forceinline__ void score_step(const float (*qs)[kScoreBlock], const float (*ks)[kScoreBlock],
                                           int c, int tx, int ty, float (&acc)[8][8]) {
    fma_outer_8x8(*reinterpret_cast<const float4*>(&qs[c][ty * 4]),
                  *reinterpret_cast<const float4*>(&qs[c][32 + ty * 4]),
                  *reinterpret_cast<const float4*>(&ks[c][tx * 4]),
                  *reinterpret_cast<const float4*>(&ks[c][32 + tx * 4]), acc);
}

template <bool Vec>
__global__ void __launch_bounds__(kScoreThreads, 8)
    vsa_scores_kernel(const float* __restrict__ q, const float* __restrict__ k, float* __restrict__ scores,
                      int64_t n, int64_t d, float div) {
    __shared__ __align__(16) float qs[kScoreChunk][kScoreBlock];
    __shared__ __align__(16) float ks[kScoreChunk][kScoreBlock];
    const int tx = threadIdx.x & 7, ty = threadIdx.x >> 3;
    const int64_t h = blockIdx.z, i0 = static_cast<int64_t>(blockIdx.y) * kScoreBlock,
                  j0 = static_cast<int64_t>(blockIdx.x) * kScoreBlock;
    const float* qh = q + h * n * d;
    const float* kh = k + h * n * d;
    float acc[8][8];
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int s = 0; s < 8; ++s) acc[r][s] = 0.0f;
    for (int64_t d0 = 0; d0 < d; d0 += kScoreChunk) {
        const int len = d - d0 < kScoreChunk ? static_cast<int>(d - d0) : kScoreChunk;
        score_stage<Vec>(qh, qs, i0, n, d, d0, len);
        score_stage<Vec>(kh, ks, j0, n, d, d0, len);
        __syncthreads();
        if (len == kScoreChunk) {
#pragma unroll
            for (int c = 0; c < kScoreChunk; ++c) score_step(qs, ks, c, tx, ty, acc);
        } else {
            for (int c = 0; c < len; ++c) score_step(qs, ks, c, tx, ty, acc);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int64_t i = i0 + (r < 4 ? ty * 4 + r : 32 + ty * 4 + r - 4);
        if (i >= n) continue;
        float* out = scores + (h * n + i) * n;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int64_t j = j0 + half * 32 + tx * 4;
            float res[4];
#pragma unroll
            for (int s = 0; s < 4; ++s) res[s] = __fdiv_rn(acc[r][half * 4 + s], div);
            if constexpr (Vec) {
                if (j < n) *reinterpret_cast<float4*>(out + j) = make_float4(res[0], res[1], res[2], res[3]);
            } else {
#pragma unroll
                for (int s = 0; s < 4; ++s)
                    if (j + s < n) out[j + s] = res[s];
            }
        }
    }
}

// ---- selection --------------------------------------------------------------------------------------------

// Larger score → larger key; NaN ranks as −inf and −0 as +0 (the CPU reference compares values). Every real
// score maps above 0 (−inf → 0x007fffff), so 0 marks an absent candidate.
__device__ __forceinline__ uint32_t order_key(float s) {
    if (isnan(s)) s = -INFINITY;
    if (s == 0.0f) s = 0.0f;
    const uint32_t b = __float_as_uint(s);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ int warp_count(int c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return static_cast<int>(__reduce_add_sync(0xffffffffu, static_cast<unsigned>(c)));
#else
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
    return c;
#endif
}

// Warp path (up to kSelectWarpMax candidates): one warp per (video query tile, head), kSelectWarps warps a
// block; lane l holds the keys of candidates l + 32·j, j < J, in registers. The take-th largest key K is
// found bit by bit from the top (up to 32 steps of count(keys ≥ prefix | bit) ≥ take, ending early when the
// count is exactly take); the candidates above K and the lowest-indexed (take − count(keys > K)) equal to K
// are then written in ascending order with ballots.
constexpr int kSelectWarps = 4;
constexpr int kSelectWarpMax = 64 * 32; // J = 64 keys a lane

template <int J>
__global__ void __launch_bounds__(kSelectWarps * 32)
    vsa_select_warp_kernel(const float* __restrict__ scores, int32_t* __restrict__ lists, int n, int prefix,
                           int video, int width, int first, int take, bool exempt) {
    const int lane = threadIdx.x & 31;
    const int i = blockIdx.x * kSelectWarps + (threadIdx.x >> 5), h = blockIdx.y;
    if (i >= video) return; // a whole warp
    const int m = n - first, groups = (m + 31) / 32;
    const float* row = scores + (static_cast<int64_t>(h) * n + prefix + i) * n + first;
    uint32_t key[J];
#pragma unroll
    for (int j = 0; j < J; ++j) {
        const int e = lane + 32 * j;
        key[j] = e < m ? order_key(row[e]) : 0u;
    }
    uint32_t kth = 0u;
    for (int bit = 31; bit >= 0; --bit) {
        const uint32_t cand = kth | (1u << bit);
        int c = 0;
#pragma unroll
        for (int j = 0; j < J; ++j)
            if (j < groups) c += key[j] >= cand ? 1 : 0;
        const int count = warp_count(c);
        if (count >= take) {
            kth = cand;
            if (count == take) break; // exactly the keys ≥ cand: K may stay a bound, not a key value
        }
    }
    int above = 0;
#pragma unroll
    for (int j = 0; j < J; ++j)
        if (j < groups) above += key[j] > kth ? 1 : 0;
    int equal_left = take - warp_count(above); // keys equal to K still to take, lowest indices first

    int32_t* out = lists + (static_cast<int64_t>(h) * video + i) * width;
    int pos = 0;
    if (exempt) {
        for (int t = lane; t < prefix; t += 32) out[t] = t;
        pos = prefix;
    }
    const unsigned below = (1u << lane) - 1u;
#pragma unroll
    for (int j = 0; j < J; ++j) {
        if (j >= groups) break;
        const int e = lane + 32 * j;
        const bool eq = e < m && key[j] == kth;
        const unsigned eq_ballot = __ballot_sync(0xffffffffu, eq);
        const bool sel = e < m && (key[j] > kth || (eq && __popc(eq_ballot & below) < equal_left));
        const unsigned sel_ballot = __ballot_sync(0xffffffffu, sel);
        if (sel) out[pos + __popc(sel_ballot & below)] = first + e;
        pos += __popc(sel_ballot);
        const int eq_count = __popc(eq_ballot);
        equal_left -= eq_count < equal_left ? eq_count : equal_left;
    }
}

// Block path (more candidates than the warp path holds): one 256-thread block per (video query tile, head),
// the keys in shared memory, a 4-pass radix select (8 bits a pass) with shared histograms.
constexpr int kSelectThreads = 256;

// Exclusive prefix count of `flag` over the block (in thread order) and the block's total.
__device__ __forceinline__ int block_exclusive_count(bool flag, int& total, int* warp_counts) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    const int before_in_warp = __popc(ballot & ((1u << lane) - 1u));
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, sum = 0;
    for (int w = 0; w < kSelectThreads / 32; ++w) {
        if (w < warp) before += warp_counts[w];
        sum += warp_counts[w];
    }
    __syncthreads(); // warp_counts is reused by the next call
    total = sum;
    return before + before_in_warp;
}

__global__ void __launch_bounds__(kSelectThreads)
    vsa_select_kernel(const float* __restrict__ scores, int32_t* __restrict__ lists, int64_t n,
                      int64_t prefix, int64_t video, int64_t width, int64_t first, int64_t take,
                      bool exempt) {
    extern __shared__ uint32_t keys[]; // one per candidate
    __shared__ int hist[256];
    __shared__ int warp_counts[kSelectThreads / 32];
    __shared__ uint32_t s_prefix;
    __shared__ int s_remaining;
    const int64_t i = blockIdx.x, h = blockIdx.y;
    const int64_t m = n - first; // candidates first..n-1
    const float* row = scores + (h * n + prefix + i) * n;
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x) keys[e] = order_key(row[first + e]);
    if (threadIdx.x == 0) {
        s_prefix = 0u;
        s_remaining = static_cast<int>(take);
    }
    // Radix select (8 bits per pass, high to low): the take-th largest key.
    uint32_t mask = 0u;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
        __syncthreads();
        const uint32_t pre = s_prefix;
        for (int64_t e = threadIdx.x; e < m; e += blockDim.x)
            if ((keys[e] & mask) == pre) atomicAdd(&hist[(keys[e] >> shift) & 255u], 1);
        __syncthreads();
        if (threadIdx.x == 0) {
            int above = 0, want = s_remaining, digit = 255;
            for (; digit > 0; --digit) {
                if (above + hist[digit] >= want) break;
                above += hist[digit];
            }
            s_prefix = pre | (static_cast<uint32_t>(digit) << shift);
            s_remaining = want - above;
        }
        mask |= 255u << shift;
        __syncthreads();
    }
    const uint32_t kth = s_prefix;
    const int equal_wanted = s_remaining; // keys equal to kth that are taken, lowest indices first
    int32_t* out = lists + (h * video + i) * width;
    int64_t pos = 0;
    if (exempt) {
        for (int64_t t = threadIdx.x; t < prefix; t += blockDim.x) out[t] = static_cast<int32_t>(t);
        pos = prefix;
    }
    int equal_before = 0;
    for (int64_t base = 0; base < m; base += blockDim.x) {
        const int64_t e = base + threadIdx.x;
        const uint32_t key = e < m ? keys[e] : 0u;
        const bool eq = e < m && key == kth;
        int eq_total = 0;
        const int eq_rank = equal_before + block_exclusive_count(eq, eq_total, warp_counts);
        const bool sel = e < m && (key > kth || (eq && eq_rank < equal_wanted));
        int sel_total = 0;
        const int sel_pos = block_exclusive_count(sel, sel_total, warp_counts);
        if (sel) out[pos + sel_pos] = static_cast<int32_t>(first + e);
        equal_before += eq_total;
        pos += sel_total;
    }
}

// ---- compression branch -----------------------------------------------------------------------------------

// oc = (Σ_j exp(s_ij − max_i)·v̄_j) / Σ_j exp(s_ij − max_i): an fp32 GEMM of the unnormalized probabilities
// and v̄ (fmaf, j ascending), the row sum divided out at the end.
//
// One block of 64 threads (2 warps) per (32 query tiles, head, 128 channels): 1,232 blocks at full width, 8
// an SM at once (128 registers a thread: 64 accumulators), so ~1.2 waves on an H100. First warp w takes rows
// 16w..16w+15 (8 at a time, 8 loads in flight): each lane the max and Σ expf(s − max) over its j = lane +
// 32k, then a butterfly over the warp. Then the key tiles pass in chunks of 32: exp(s − max) (transposed,
// ps[j][row]) and v̄ (vs[j][channel]) are staged in shared memory, and thread (tx, ty) = (t & 15, t >> 4)
// accumulates 8×8 outputs — rows ty·4 + {0..3} and 16 + ty·4 + {0..3}, channels tx·4 + {0..3} and 64 + tx·4 +
// {0..3} — from 4 LDS.128 per key tile and 64 FMA. Vec (d % 4 == 0, 16-byte aligned v̄ and oc) stages v̄ and
// stores oc as float4; otherwise scalar.
constexpr int kCompressRows = 32;
constexpr int kCompressCols = 128;
constexpr int kCompressChunk = 32;
constexpr int kCompressThreads = 64;
// ps rows stay float4-aligned; the transposed stores are 4-way bank conflicts at worst.
constexpr int kCompressPad = kCompressRows + 4;

template <bool Vec>
__global__ void __launch_bounds__(kCompressThreads, 8)
    vsa_compress_kernel(const float* __restrict__ scores, const float* __restrict__ vp,
                        float* __restrict__ oc, int64_t n, int64_t d) {
    __shared__ __align__(16) float ps[kCompressChunk][kCompressPad];
    __shared__ __align__(16) float vs[kCompressChunk][kCompressCols];
    __shared__ float row_max[kCompressRows], row_sum[kCompressRows];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kCompressRows, h = blockIdx.y,
                  c0 = static_cast<int64_t>(blockIdx.z) * kCompressCols;
    const float* sh = scores + h * n * n;
    const float* vh = vp + h * n * d;
    // Row statistics; rows past n keep max 0, sum 1 (never stored).
#pragma unroll 1
    for (int g = 0; g < kCompressRows / 2 / 8; ++g) {
        const int64_t r0 = i0 + warp * (kCompressRows / 2) + g * 8;
        float mx[8], sum[8];
#pragma unroll
        for (int r = 0; r < 8; ++r) mx[r] = r0 + r < n ? -INFINITY : 0.0f;
        for (int64_t j = lane; j < n; j += 32)
#pragma unroll
            for (int r = 0; r < 8; ++r)
                if (r0 + r < n) mx[r] = fmaxf(mx[r], sh[(r0 + r) * n + j]);
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            mx[r] = warp_max(mx[r]);
            sum[r] = 0.0f;
        }
        for (int64_t j = lane; j < n; j += 32)
#pragma unroll
            for (int r = 0; r < 8; ++r)
                if (r0 + r < n) sum[r] += expf(sh[(r0 + r) * n + j] - mx[r]);
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            sum[r] = r0 + r < n ? warp_sum(sum[r]) : 1.0f;
            const int row = static_cast<int>(r0 - i0) + r;
            if (lane == 0) row_max[row] = mx[r], row_sum[row] = sum[r];
        }
    }
    __syncthreads();
    float acc[8][8];
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[r][c] = 0.0f;
    for (int64_t j0 = 0; j0 < n; j0 += kCompressChunk) {
        // exp(s − max) of 32 rows × 32 key tiles: a warp reads one row's 32 scores (128 bytes) per step.
#pragma unroll
        for (int it = 0; it < kCompressRows * kCompressChunk / kCompressThreads; ++it) {
            const int e = it * kCompressThreads + static_cast<int>(threadIdx.x);
            const int r = e / kCompressChunk, jj = e % kCompressChunk;
            const int64_t i = i0 + r, j = j0 + jj;
            ps[jj][r] = (i < n && j < n) ? expf(sh[i * n + j] - row_max[r]) : 0.0f;
        }
        if constexpr (Vec) {
#pragma unroll 4
            for (int it = 0; it < kCompressChunk * kCompressCols / 4 / kCompressThreads; ++it) {
                const int e = it * kCompressThreads + static_cast<int>(threadIdx.x);
                const int jj = e / (kCompressCols / 4), c = (e % (kCompressCols / 4)) * 4;
                const int64_t j = j0 + jj;
                float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (j < n && c0 + c < d) v = *reinterpret_cast<const float4*>(vh + j * d + c0 + c);
                *reinterpret_cast<float4*>(&vs[jj][c]) = v;
            }
        } else {
#pragma unroll 4
            for (int it = 0; it < kCompressChunk * kCompressCols / kCompressThreads; ++it) {
                const int e = it * kCompressThreads + static_cast<int>(threadIdx.x);
                const int jj = e / kCompressCols, c = e % kCompressCols;
                const int64_t j = j0 + jj;
                vs[jj][c] = (j < n && c0 + c < d) ? vh[j * d + c0 + c] : 0.0f;
            }
        }
        __syncthreads();
#pragma unroll 8
        for (int jj = 0; jj < kCompressChunk; ++jj) {
            fma_outer_8x8(*reinterpret_cast<const float4*>(&ps[jj][ty * 4]),
                          *reinterpret_cast<const float4*>(&ps[jj][16 + ty * 4]),
                          *reinterpret_cast<const float4*>(&vs[jj][tx * 4]),
                          *reinterpret_cast<const float4*>(&vs[jj][64 + tx * 4]), acc);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int row = r < 4 ? ty * 4 + r : 16 + ty * 4 + r - 4;
        const int64_t i = i0 + row;
        if (i >= n) continue;
        const float total = row_sum[row];
        float* out = oc + (h * n + i) * d + c0;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int c = half * 64 + tx * 4;
            float res[4];
#pragma unroll
            for (int s = 0; s < 4; ++s) res[s] = acc[r][half * 4 + s] / total;
            if constexpr (Vec) {
                if (c0 + c < d)
                    *reinterpret_cast<float4*>(out + c) = make_float4(res[0], res[1], res[2], res[3]);
            } else {
#pragma unroll
                for (int s = 0; s < 4; ++s)
                    if (c0 + c + s < d) out[c + s] = res[s];
            }
        }
    }
}

// ---- gate add ---------------------------------------------------------------------------------------------

// o = o + round(round(oc)·gate) per element (vsa_gate_add_one: the rounding as the CPU reference does it).

// Vector path (D % 8 == 0, 16-byte aligned): one thread per 8 channels of one (row, head), 16-byte loads of o
// and gate (two for f32) and two float4 loads of oc; 32-bit index arithmetic (the host checks the range).
template <typename T, typename G>
__global__ void vsa_gate_add_vec_kernel(const float* __restrict__ oc, const G* __restrict__ gate,
                                        T* __restrict__ o, const int32_t* __restrict__ row_tiles,
                                        uint32_t vecs, uint32_t vecs_per_row, uint32_t vecs_per_head,
                                        int64_t d, int64_t tiles, bool round) {
    const uint32_t v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= vecs) return;
    const uint32_t r = v / vecs_per_row, rem = v - r * vecs_per_row;
    const uint32_t h = rem / vecs_per_head, c = (rem - h * vecs_per_head) * 8u;
    const int32_t tile = row_tiles[r];
    if (tile < 0 || tile >= tiles) return;
    const int64_t off = static_cast<int64_t>(v) * 8;
    float ov[8], gv[8], cv[8];
    load_vec<8>(o + off, ov);
    load_vec<8>(gate + off, gv);
    load_vec<8>(oc + (static_cast<int64_t>(h) * tiles + tile) * d + c, cv);
#pragma unroll
    for (int e = 0; e < 8; ++e) ov[e] = vsa_gate_add_one<T>(ov[e], cv[e], gv[e], round);
    store_vec<8>(o + off, ov);
}

// Any D: one thread per element.
template <typename T, typename G>
__global__ void vsa_gate_add_kernel(const float* __restrict__ oc, const G* __restrict__ gate,
                                    T* __restrict__ o, const int32_t* __restrict__ row_tiles, int64_t rows,
                                    int64_t heads, int64_t d, int64_t tiles, bool round) {
    const int64_t total = rows * heads * d;
    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = idx / (heads * d), h = (idx / d) % heads, c = idx % d;
        const int32_t tile = row_tiles[r];
        if (tile < 0 || tile >= tiles) continue;
        o[idx] = from_f32<T>(
            vsa_gate_add_one<T>(to_f32(o[idx]), oc[(h * tiles + tile) * d + c], to_f32(gate[idx]), round));
    }
}

Status set_smem(const void* kernel, size_t bytes, const char* what) {
    if (bytes <= 48 * 1024) return ok_status();
    return cuda_status(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        what);
}

} // namespace

namespace {

// Pools xs[0..count) (one shape and dtype) into out [count, H, tiles, D] with one launch.
Status pool_inputs(const Context& ctx, const VsaTiles& tiles, const Tensor* const* xs, int count, Tensor& out,
                   const char* what) {
    const Tensor& x0 = *xs[0];
    const int64_t H = x0.dim(1), D = x0.dim(2), n = tiles.num_tiles();
    const int64_t vecs_per_row = H * D / 8;
    bool vec = D % 8 == 0 && aligned16(out.data()) && vecs_per_row < (1LL << 31);
    for (int i = 0; i < count; ++i) vec = vec && aligned16(xs[i]->data());
    return dispatch_float(x0.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        PoolInputs<T> in{};
        for (int i = 0; i < count; ++i) in.x[i] = xs[i]->data_as<const T>();
        if (vec) {
            const unsigned chunks = static_cast<unsigned>((vecs_per_row + kPoolThreads - 1) / kPoolThreads);
            vsa_pool_vec_kernel<T><<<dim3(static_cast<unsigned>(n), chunks, static_cast<unsigned>(count)),
                                     kPoolThreads, 0, stream_of(ctx)>>>(
                in, tiles.slot_rows.data_as<const int32_t>(), tiles.tile_sizes.data_as<const int32_t>(),
                out.data_as<float>(), static_cast<uint32_t>(vecs_per_row), static_cast<uint32_t>(D / 8),
                H * D, D, n);
            return check_launch(what);
        }
        const int threads = D >= 128 ? 128 : (D >= 64 ? 64 : 32);
        vsa_pool_kernel<T>
            <<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(H), static_cast<unsigned>(count)),
               threads, 0, stream_of(ctx)>>>(in, tiles.slot_rows.data_as<const int32_t>(),
                                             tiles.tile_sizes.data_as<const int32_t>(), out.data_as<float>(),
                                             H, D, n);
        return check_launch(what);
    });
}

} // namespace

Status vsa_pool(const Context& ctx, const VsaTiles& tiles, const Tensor& x, Tensor& out) {
    const Tensor* xs[1] = {&x};
    return pool_inputs(ctx, tiles, xs, 1, out, "vsa_pool");
}

Status vsa_pool_qkv(const Context& ctx, const VsaTiles& tiles, const Tensor& q, const Tensor& k,
                    const Tensor& v, Tensor& out) {
    const Tensor* xs[3] = {&q, &k, &v};
    return pool_inputs(ctx, tiles, xs, v.defined() ? 3 : 2, out, "vsa_pool_qkv");
}

Status vsa_tile_scores(const Context& ctx, const Tensor& q, const Tensor& k, Tensor& scores) {
    const int64_t H = q.dim(0), n = q.dim(1), D = q.dim(2);
    const unsigned blocks = static_cast<unsigned>((n + kScoreBlock - 1) / kScoreBlock);
    const bool vec =
        D % 4 == 0 && n % 4 == 0 && aligned16(q.data()) && aligned16(k.data()) && aligned16(scores.data());
    const dim3 grid(blocks, blocks, static_cast<unsigned>(H));
    auto launch = [&](auto kernel) {
        kernel<<<grid, kScoreThreads, 0, stream_of(ctx)>>>(q.data_as<const float>(), k.data_as<const float>(),
                                                           scores.data_as<float>(), n, D,
                                                           sqrtf(static_cast<float>(D)));
        return check_launch("vsa_tile_scores");
    };
    return vec ? launch(vsa_scores_kernel<true>) : launch(vsa_scores_kernel<false>);
}

Status vsa_select(const Context& ctx, const VsaSelectParams& p, const VsaTiles& tiles, const Tensor& scores,
                  Tensor& lists) {
    const int64_t H = scores.dim(0), n = tiles.num_tiles(), P = tiles.num_prefix_tiles,
                  nv = tiles.num_video_tiles;
    const bool exempt = !p.compete || P == 0;
    const int64_t width = vsa_select_width(p, P, n), first = exempt ? P : 0, take = exempt ? p.keep : width;
    const int64_t m = n - first; // candidates
    if (m <= kSelectWarpMax) {
        const dim3 grid(static_cast<unsigned>((nv + kSelectWarps - 1) / kSelectWarps),
                        static_cast<unsigned>(H));
        auto launch = [&](auto kernel) {
            kernel<<<grid, kSelectWarps * 32, 0, stream_of(ctx)>>>(
                scores.data_as<const float>(), lists.data_as<int32_t>(), static_cast<int>(n),
                static_cast<int>(P), static_cast<int>(nv), static_cast<int>(width), static_cast<int>(first),
                static_cast<int>(take), exempt);
            return check_launch("vsa_select");
        };
        if (m <= 4 * 32) return launch(vsa_select_warp_kernel<4>);
        if (m <= 8 * 32) return launch(vsa_select_warp_kernel<8>);
        if (m <= 16 * 32) return launch(vsa_select_warp_kernel<16>);
        if (m <= 32 * 32) return launch(vsa_select_warp_kernel<32>);
        return launch(vsa_select_warp_kernel<64>);
    }
    const size_t smem = static_cast<size_t>(m) * sizeof(uint32_t);
    H3_TRY(
        set_smem(reinterpret_cast<const void*>(vsa_select_kernel), smem, "cudaFuncSetAttribute(vsa_select)"));
    vsa_select_kernel<<<dim3(static_cast<unsigned>(nv), static_cast<unsigned>(H)), kSelectThreads, smem,
                        stream_of(ctx)>>>(scores.data_as<const float>(), lists.data_as<int32_t>(), n, P, nv,
                                          width, first, take, exempt);
    return check_launch("vsa_select");
}

Status vsa_compress_tiles(const Context& ctx, const Tensor& scores, const Tensor& vp, Tensor& oc) {
    const int64_t H = scores.dim(0), n = scores.dim(1), D = vp.dim(2);
    const dim3 grid(static_cast<unsigned>((n + kCompressRows - 1) / kCompressRows), static_cast<unsigned>(H),
                    static_cast<unsigned>((D + kCompressCols - 1) / kCompressCols));
    const bool vec = D % 4 == 0 && aligned16(vp.data()) && aligned16(oc.data());
    auto launch = [&](auto kernel) {
        kernel<<<grid, kCompressThreads, 0, stream_of(ctx)>>>(
            scores.data_as<const float>(), vp.data_as<const float>(), oc.data_as<float>(), n, D);
        return check_launch("vsa_compress_tiles");
    };
    return vec ? launch(vsa_compress_kernel<true>) : launch(vsa_compress_kernel<false>);
}

Status vsa_gate_add(const Context& ctx, const VsaGateAddParams& p, const VsaTiles& tiles, const Tensor& oc,
                    const Tensor& gate, Tensor& o) {
    const int64_t S = o.dim(0), H = o.dim(1), D = o.dim(2), n = tiles.num_tiles();
    const int64_t vecs = S * H * D / 8;
    const bool vec = D % 8 == 0 && aligned16(o.data()) && aligned16(gate.data()) && aligned16(oc.data()) &&
                     vecs < (1LL << 31);
    return dispatch_float(o.dtype(), [&](auto to) {
        using T = typename decltype(to)::type;
        return dispatch_float(gate.dtype(), [&](auto tg) {
            using G = typename decltype(tg)::type;
            if (vec) {
                vsa_gate_add_vec_kernel<T, G><<<grid_for(vecs, 256, 1LL << 31), 256, 0, stream_of(ctx)>>>(
                    oc.data_as<const float>(), gate.data_as<const G>(), o.data_as<T>(),
                    tiles.row_tiles.data_as<const int32_t>(), static_cast<uint32_t>(vecs),
                    static_cast<uint32_t>(H * D / 8), static_cast<uint32_t>(D / 8), D, n,
                    p.round_intermediate);
                return check_launch("vsa_gate_add");
            }
            vsa_gate_add_kernel<T, G><<<grid_for(S * H * D, 256), 256, 0, stream_of(ctx)>>>(
                oc.data_as<const float>(), gate.data_as<const G>(), o.data_as<T>(),
                tiles.row_tiles.data_as<const int32_t>(), S, H, D, n, p.round_intermediate);
            return check_launch("vsa_gate_add");
        });
    });
}

} // namespace h3::ops::cuda_impl
