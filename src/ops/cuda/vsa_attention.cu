// block_sparse_attention (ops/vsa.h): flash attention over 64-row tiles where each query tile visits only its
// listed key tiles, so the time scales with the kept fraction.
//
// Fast path (bf16/f16, head dim 64 or 128): one CTA of 4 warps per (head, query tile), 16 query rows per
// warp; tensor cores through mma.sync m16n8k16 (fp32 accumulation); the tiles' rows are gathered from the
// packed [rows, H, D] tensors by the tile map with cp.async (16-byte chunks, pad slots zero-filled) into
// XOR-swizzled shared memory, K/V double-buffered so the next tile loads while this one computes; online
// softmax in fp32 (exp2 with the scale folded in), pad key slots masked by the tile's size, P rounded to the
// input dtype for the P·V product. Prefix query tiles (heavy: every tile) come first in the grid.
// Fallback (f32, other head dims ≤ 128): the same walk with scalar fp32 math, one query row per warp pass.
// On H100/H200 bf16 with head dim 128 runs the wgmma kernel instead (vsa_attention_hopper.cu).
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/tensor_map.h"
#include "ops/cuda/vsa_hopper.h"
#include "ops/provenance.h"
#include "ops/validate.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kTile = kVsaTileRows; // 64 rows per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

// cp.async and mma.sync m16n8k16 need sm_80: on older targets (sm_75, the fp16-only GPUs) the tensor-core
// kernel compiles to a trap and block_sparse_attention takes the scalar kernel (cc_major() < 8).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define H3_VSA_MMA 1
#else
#define H3_VSA_MMA 0
#endif

// ---- PTX wrappers
// -------------------------------------------------------------------------------------------
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, int src_bytes) {
#if H3_VSA_MMA
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if H3_VSA_MMA
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if H3_VSA_MMA
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* smem) {
#if H3_VSA_MMA
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* smem) {
#if H3_VSA_MMA
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}

// c += a·b for a 16×16 (row) by 16×8 (col) tile, fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if H3_VSA_MMA
    if constexpr (std::is_same_v<T, bf16>) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
#endif
}

// Two floats as one register of two 16-bit values (the lower index in the low half).
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    uint32_t r;
    if constexpr (std::is_same_v<T, bf16>) {
        __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        r = *reinterpret_cast<uint32_t*>(&v);
    } else {
        __half2 v = __floats2half2_rn(lo, hi);
        r = *reinterpret_cast<uint32_t*>(&v);
    }
    return r;
}

// Element offset of 16-byte chunk `chunk` of row `row` in a [64][D] tile stored with the chunk index XORed by
// row % 8 (ldmatrix's 8 row addresses then hit 8 different bank groups).
template <int D> __device__ __forceinline__ int swz(int row, int chunk) {
    return row * D + ((chunk ^ (row & 7)) << 3);
}

// The kernel's view of its arguments.
struct TileArgs {
    const int32_t* slot_rows;
    const int32_t* tile_sizes;
    const int32_t* lists;
    int64_t heads, tiles, prefix, width;
};

// Gathers one tile's 64 rows of head h (pad slots → zeros) into swizzled shared memory.
template <typename T, int D>
__device__ __forceinline__ void load_tile(T* dst, const T* __restrict__ src,
                                          const int32_t* __restrict__ slots, int64_t pitch, int64_t h) {
    constexpr int kChunks = D / 8;
    for (int e = threadIdx.x; e < kTile * kChunks; e += kThreads) {
        const int r = e / kChunks, c = e % kChunks;
        const int32_t row = slots[r];
        const T* g = row >= 0 ? src + static_cast<int64_t>(row) * pitch + h * D + c * 8 : src;
        cp_async_16(dst + swz<D>(r, c), g, row >= 0 ? 16 : 0);
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    bsa_mma_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                   T* __restrict__ o, TileArgs a, float scale_log2) {
#if H3_VSA_MMA
    extern __shared__ uint4 smem_raw[];
    T* sq = reinterpret_cast<T*>(smem_raw); // [64][D]
    T* sk = sq + kTile * D;                 // [2][64][D]
    T* sv = sk + 2 * kTile * D;             // [2][64][D]
    const int64_t h = blockIdx.x, qt = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t pitch = a.heads * D;
    const bool dense = qt < a.prefix;
    const int32_t* list = dense ? nullptr : a.lists + (h * (a.tiles - a.prefix) + (qt - a.prefix)) * a.width;
    const int count = static_cast<int>(dense ? a.tiles : a.width);
    auto key_tile = [&](int i) -> int64_t {
        if (dense) return i;
        const int32_t t = list[i];
        return t >= 0 && t < a.tiles ? t : -1; // out-of-range entries are skipped (cuda_ops.h)
    };

    load_tile<T, D>(sq, q, a.slot_rows + qt * kTile, pitch, h);
    {
        const int64_t kt0 = key_tile(0);
        if (kt0 >= 0) {
            load_tile<T, D>(sk, k, a.slot_rows + kt0 * kTile, pitch, h);
            load_tile<T, D>(sv, v, a.slot_rows + kt0 * kTile, pitch, h);
        }
    }
    cp_async_commit();

    constexpr int kKSteps = D / 16; // 16-wide steps over the head dim
    constexpr int kDTiles = D / 8;  // 8-wide output column tiles
    uint32_t qf[kKSteps][4];
    float acc[kDTiles][4];
#pragma unroll
    for (int i = 0; i < kDTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; // rows lane/4 and lane/4 + 8

    for (int it = 0; it < count; ++it) {
        cp_async_wait_all();
        __syncthreads(); // tile `it` landed; every warp is done with the buffer the next load overwrites
        if (it == 0) {
#pragma unroll
            for (int kk = 0; kk < kKSteps; ++kk)
                ldsm_x4(qf[kk], sq + swz<D>(warp * 16 + (lane & 15), kk * 2 + (lane >> 4)));
        }
        if (it + 1 < count) {
            const int64_t nt = key_tile(it + 1);
            if (nt >= 0) {
                const int b = (it + 1) & 1;
                load_tile<T, D>(sk + b * kTile * D, k, a.slot_rows + nt * kTile, pitch, h);
                load_tile<T, D>(sv + b * kTile * D, v, a.slot_rows + nt * kTile, pitch, h);
            }
            cp_async_commit();
        }
        const int64_t kt = key_tile(it);
        if (kt < 0) continue;
        const T* kb = sk + (it & 1) * kTile * D;
        const T* vb = sv + (it & 1) * kTile * D;
        const int valid = a.tile_sizes[kt];

        // S = Q·Kᵀ: this warp's 16 rows × 64 keys, eight 16×8 tiles.
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk)
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                uint32_t b[4];
                ldsm_x4(b,
                        kb + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1)));
                mma_16816<T>(s[2 * np], qf[kk], b[0], b[1]);
                mma_16816<T>(s[2 * np + 1], qf[kk], b[2], b[3]);
            }
        // Scale into the log2 domain, mask pad keys, running max per row.
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = j * 8 + (lane & 3) * 2 + (e & 1);
                s[j][e] = col < valid ? s[j][e] * scale_log2 : -INFINITY;
                if (e < 2)
                    mx0 = fmaxf(mx0, s[j][e]);
                else
                    mx1 = fmaxf(mx1, s[j][e]);
            }
#pragma unroll
        for (int off = 1; off <= 2; off <<= 1) {
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
        }
        const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1); // finite: every tile has a valid key
        const float c0 = exp2f(m0 - n0), c1 = exp2f(m1 - n1); // 0 on the first tile (m = −inf)
        m0 = n0;
        m1 = n1;
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            s[j][0] = exp2f(s[j][0] - n0);
            s[j][1] = exp2f(s[j][1] - n0);
            s[j][2] = exp2f(s[j][2] - n1);
            s[j][3] = exp2f(s[j][3] - n1);
            ps0 += s[j][0] + s[j][1];
            ps1 += s[j][2] + s[j][3];
        }
        l0 = l0 * c0 + ps0;
        l1 = l1 * c1 + ps1;
#pragma unroll
        for (int i = 0; i < kDTiles; ++i) {
            acc[i][0] *= c0;
            acc[i][1] *= c0;
            acc[i][2] *= c1;
            acc[i][3] *= c1;
        }
        // O += P·V: P from the score registers (16 keys per step), V through transposed ldmatrix.
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            const uint32_t p[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                   pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t b[4];
                ldsm_x4_trans(b, vb + swz<D>(kk * 16 + (lane & 15), dp * 2 + (lane >> 4)));
                mma_16816<T>(acc[2 * dp], p, b[0], b[1]);
                mma_16816<T>(acc[2 * dp + 1], p, b[2], b[3]);
            }
        }
    }
    // Row sums across the quad, then the store of the valid query rows.
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, off);
        l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
    const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    const int slot0 = warp * 16 + (lane >> 2);
    const int32_t r0 = a.slot_rows[qt * kTile + slot0], r1 = a.slot_rows[qt * kTile + slot0 + 8];
#pragma unroll
    for (int i = 0; i < kDTiles; ++i) {
        const int col = i * 8 + (lane & 3) * 2;
        if (r0 >= 0)
            *reinterpret_cast<uint32_t*>(o + static_cast<int64_t>(r0) * pitch + h * D + col) =
                pack2<T>(acc[i][0] * inv0, acc[i][1] * inv0);
        if (r1 >= 0)
            *reinterpret_cast<uint32_t*>(o + static_cast<int64_t>(r1) * pitch + h * D + col) =
                pack2<T>(acc[i][2] * inv1, acc[i][3] * inv1);
    }
#else
    __trap();
#endif
}

// ---- fallback: scalar fp32, any float dtype, head dim ≤ 128
// -------------------------------------------------
constexpr int kMaxLane = 4; // channels per lane: D ≤ 128
constexpr int kRowsPerWarp = kTile / kWarps;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    bsa_scalar_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                      T* __restrict__ o, TileArgs a, int d, float scale) {
    extern __shared__ float fs[];
    float* sq = fs;                   // [64][d]
    float* sk = sq + kTile * d;       // [64][d + 1] (lane j reads row j)
    float* sv = sk + kTile * (d + 1); // [64][d]
    __shared__ int32_t qrows[kTile];
    const int64_t h = blockIdx.x, qt = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t pitch = a.heads * d;
    const bool dense = qt < a.prefix;
    const int32_t* list = dense ? nullptr : a.lists + (h * (a.tiles - a.prefix) + (qt - a.prefix)) * a.width;
    const int count = static_cast<int>(dense ? a.tiles : a.width);
    for (int s = threadIdx.x; s < kTile; s += kThreads) qrows[s] = a.slot_rows[qt * kTile + s];
    __syncthreads();
    for (int e = threadIdx.x; e < kTile * d; e += kThreads) {
        const int r = e / d, c = e % d;
        sq[e] = qrows[r] >= 0 ? to_f32(q[static_cast<int64_t>(qrows[r]) * pitch + h * d + c]) : 0.0f;
    }
    float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kMaxLane];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < kMaxLane; ++i) acc[r][i] = 0.0f;
    }
    for (int it = 0; it < count; ++it) {
        const int64_t kt = dense ? it : list[it];
        __syncthreads(); // the previous tile is consumed (and sq written)
        if (kt < 0 || kt >= a.tiles) continue;
        const int32_t* kslots = a.slot_rows + kt * kTile;
        for (int e = threadIdx.x; e < kTile * d; e += kThreads) {
            const int r = e / d, c = e % d;
            const int32_t row = kslots[r];
            const int64_t src = static_cast<int64_t>(row) * pitch + h * d + c;
            sk[r * (d + 1) + c] = row >= 0 ? to_f32(k[src]) : 0.0f;
            sv[r * d + c] = row >= 0 ? to_f32(v[src]) : 0.0f;
        }
        __syncthreads();
        const int valid = a.tile_sizes[kt];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const float* qr = sq + (warp * kRowsPerWarp + r) * d;
            float sc[2];
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int j = lane + 32 * half;
                float dot = 0.0f;
                const float* kr = sk + j * (d + 1);
                for (int c = 0; c < d; ++c) dot = fmaf(qr[c], kr[c], dot);
                sc[half] = j < valid ? dot * scale : -INFINITY;
            }
            const float mn = fmaxf(m[r], warp_max(fmaxf(sc[0], sc[1])));
            const float corr = expf(m[r] - mn);
            const float p0 = expf(sc[0] - mn), p1 = expf(sc[1] - mn);
            l[r] = l[r] * corr + warp_sum(p0 + p1);
            m[r] = mn;
#pragma unroll
            for (int i = 0; i < kMaxLane; ++i) acc[r][i] *= corr;
            for (int j = 0; j < kTile; ++j) {
                const float pj = __shfl_sync(0xffffffffu, j < 32 ? p0 : p1, j & 31);
#pragma unroll
                for (int i = 0; i < kMaxLane; ++i) {
                    const int c = lane + 32 * i;
                    if (c < d) acc[r][i] = fmaf(pj, sv[j * d + c], acc[r][i]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int32_t row = qrows[warp * kRowsPerWarp + r];
        if (row < 0) continue;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
        for (int i = 0; i < kMaxLane; ++i) {
            const int c = lane + 32 * i;
            if (c < d) o[static_cast<int64_t>(row) * pitch + h * d + c] = from_f32<T>(acc[r][i] * inv);
        }
    }
}

template <typename T, int D>
Status launch_mma(const Context& ctx, const TileArgs& a, const Tensor& q, const Tensor& k, const Tensor& v,
                  Tensor& o, float scale) {
    const size_t smem = static_cast<size_t>(5 * kTile * D) * sizeof(T);
    H3_CUDA_TRY(cudaFuncSetAttribute(bsa_mma_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)),
                "cudaFuncSetAttribute(block_sparse_attention)");
    bsa_mma_kernel<T, D><<<dim3(static_cast<unsigned>(a.heads), static_cast<unsigned>(a.tiles)), kThreads,
                           smem, stream_of(ctx)>>>(q.data_as<const T>(), k.data_as<const T>(),
                                                   v.data_as<const T>(), o.data_as<T>(), a, scale * kLog2e);
    return check_launch("block_sparse_attention (mma)");
}

// The attention alone, or (fuse_gate, where the wgmma kernel runs) with p.gate_add in its epilogue: `fused`
// says which.
Status attend(const Context& ctx, const BlockSparseAttentionParams& p, const VsaTiles& tiles, const Tensor& q,
              const Tensor& k, const Tensor& v, const Tensor& lists, Tensor& o, bool fuse_gate, bool& fused) {
    fused = false;
    const int64_t H = q.dim(1), D = q.dim(2);
    const TileArgs a{tiles.slot_rows.data_as<const int32_t>(),
                     tiles.tile_sizes.data_as<const int32_t>(),
                     lists.data_as<const int32_t>(),
                     H,
                     tiles.num_tiles(),
                     tiles.num_prefix_tiles,
                     lists.dim(2)};
    const bool aligned = pointer_alignment(q.data()) >= 16 && pointer_alignment(k.data()) >= 16 &&
                         pointer_alignment(v.data()) >= 16 && pointer_alignment(o.data()) >= 16;
    const bool hopper = aligned && q.dtype() == DType::kBF16 && D == 128 && hopper_kernels_usable(ctx);
    if (p.fp8 && (!hopper || p.impl == BlockSparseImpl::kMma))
        return unimplemented(
            "block_sparse_attention: the fp8 mode runs the wgmma kernel only (bf16 in, head dim "
            "128, an sm_90a build and device); q is " +
            detail::desc(q));
    if (p.impl == BlockSparseImpl::kHopper || (p.impl == BlockSparseImpl::kAuto && hopper)) {
        if (!hopper)
            return unimplemented(
                "block_sparse_attention: the wgmma kernel takes bf16, head dim 128, 16-byte aligned tensors "
                "on an sm_90a build and device; q is " +
                detail::desc(q));
        const cuda_detail::HopperBlockSparseArgs ha{
            .q = q.data(),
            .k = k.data(),
            .v = v.data(),
            .o = o.data(),
            .slot_rows = a.slot_rows,
            .tile_sizes = a.tile_sizes,
            .lists = a.lists,
            .rows = q.dim(0),
            .heads = H,
            .dim = D,
            .tiles = a.tiles,
            .prefix = a.prefix,
            .width = a.width,
            .scale = p.scale,
            .stages = p.hopper_stages,
            .gate = fuse_gate ? p.gate_add.gate->data() : nullptr,
            .gate_oc = fuse_gate ? p.gate_add.oc->data_as<const float>() : nullptr,
            .gate_round = p.gate_add.params.round_intermediate};
        const std::string name =
            std::string(p.fp8 ? "sm90a-wgmma-e4m3" : "sm90a-wgmma-bf16") + (fuse_gate ? "+gate" : "");
        note_impl(OpFamily::kSparseAttention, name);
        fused = fuse_gate;
        return p.fp8 ? cuda_detail::hopper_block_sparse_fp8(ctx, ha)
                     : cuda_detail::hopper_block_sparse_bf16(ctx, ha);
    }
    const bool tensor_cores = ctx.cuda && ctx.cuda->cc_major() >= 8; // cp.async + mma.sync m16n8k16
    // On an sm_90 device the wgmma kernel is what the request's settings ask for: anything else is slower.
    if (p.impl == BlockSparseImpl::kAuto && ctx.cuda && ctx.cuda->cc_major() == 9)
        note_fallback(OpFamily::kSparseAttention, "sm90a-wgmma-bf16",
                      tensor_cores && aligned && (D == 64 || D == 128) &&
                              (q.dtype() == DType::kBF16 || q.dtype() == DType::kF16)
                          ? "cuda-mma-sync"
                          : "cuda-simt",
                      !aligned ? "q/k/v/o are not 16-byte aligned"
                      : q.dtype() != DType::kBF16
                          ? std::string("q is ") + dtype_name(q.dtype()) + ", not bf16"
                      : D != 128 ? "head dim " + std::to_string(D) + ", not 128"
                                 : "this build has no sm_90a kernels");
    if (p.impl == BlockSparseImpl::kMma && !(tensor_cores && aligned && (D == 64 || D == 128) &&
                                             (q.dtype() == DType::kBF16 || q.dtype() == DType::kF16)))
        return unimplemented(
            "block_sparse_attention: the mma.sync kernel takes bf16/f16, head dim 64 or 128, "
            "16-byte aligned tensors on sm_80+; q is " +
            detail::desc(q));
    if (tensor_cores && aligned && (D == 64 || D == 128)) {
        note_impl(OpFamily::kSparseAttention,
                  q.dtype() == DType::kBF16 ? "cuda-mma-sync-bf16" : "cuda-mma-sync-f16");
        if (q.dtype() == DType::kBF16)
            return D == 128 ? launch_mma<bf16, 128>(ctx, a, q, k, v, o, p.scale)
                            : launch_mma<bf16, 64>(ctx, a, q, k, v, o, p.scale);
        if (q.dtype() == DType::kF16)
            return D == 128 ? launch_mma<f16, 128>(ctx, a, q, k, v, o, p.scale)
                            : launch_mma<f16, 64>(ctx, a, q, k, v, o, p.scale);
    }
    if (D > 32 * kMaxLane)
        return unimplemented("CUDA block_sparse_attention: head dim " + std::to_string(D) +
                             " > 128 outside the bf16/f16 64/128 tensor-core path");
    const size_t smem = sizeof(float) * static_cast<size_t>(kTile * D + kTile * (D + 1) + kTile * D);
    note_impl(OpFamily::kSparseAttention, "cuda-simt");
    return dispatch_float(q.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        H3_CUDA_TRY(cudaFuncSetAttribute(bsa_scalar_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)),
                    "cudaFuncSetAttribute(block_sparse_attention)");
        bsa_scalar_kernel<T><<<dim3(static_cast<unsigned>(H), static_cast<unsigned>(a.tiles)), kThreads, smem,
                               stream_of(ctx)>>>(q.data_as<const T>(), k.data_as<const T>(),
                                                 v.data_as<const T>(), o.data_as<T>(), a, static_cast<int>(D),
                                                 p.scale);
        return check_launch("block_sparse_attention (scalar)");
    });
}

} // namespace

Status block_sparse_attention(const Context& ctx, const BlockSparseAttentionParams& p, const VsaTiles& tiles,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lists,
                              Tensor& o) {
    // The gate add (ops::VsaFusedGateAdd) goes into the wgmma kernels' epilogue where they run and the gate
    // is bf16 with gate and oc 16-byte aligned; otherwise the attention runs, then the gate add's own kernel.
    const VsaFusedGateAdd& g = p.gate_add;
    const bool gated = g.gate != nullptr;
    const bool fusable = gated && g.gate->dtype() == DType::kBF16 &&
                         pointer_alignment(g.gate->data()) >= 16 && pointer_alignment(g.oc->data()) >= 16;
    bool fused = false;
    H3_TRY(attend(ctx, p, tiles, q, k, v, lists, o, fusable, fused));
    if (!gated || fused) return ok_status();
    return cuda_impl::vsa_gate_add(ctx, g.params, tiles, *g.oc, *g.gate, o);
}

} // namespace h3::ops::cuda_impl
