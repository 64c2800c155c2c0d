// VSA's tile kernels (ops/vsa.h): pooling, tile scores, top-k selection, the compression branch. Pooling and
// scores sum in the CPU reference's order with no fused multiply-add (__fadd_rn/__fmul_rn), so both backends
// produce the same bits and the same selection; the softmax of the compression branch uses expf and block
// reductions (close to, not bit-equal with, the CPU). The block-sparse attention is in vsa_attention.cu.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kSlots = kVsaTileRows;

// ---- pooling: one block per (tile, head), threads over channels -------------------------------------------
template <typename T>
__global__ void vsa_pool_kernel(const T* __restrict__ x, const int32_t* __restrict__ slot_rows,
                                const int32_t* __restrict__ sizes, float* __restrict__ out, int64_t heads,
                                int64_t d, int64_t tiles) {
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

// ---- tile scores: 32×32 output tiles, d in chunks of 32 through shared memory, summed in d order ----------
constexpr int kScoreTile = 32;

__global__ void vsa_scores_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                  float* __restrict__ scores, int64_t n, int64_t d, float div) {
    __shared__ float qs[kScoreTile][kScoreTile + 1];
    __shared__ float ks[kScoreTile][kScoreTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y; // 32 × 8
    const int64_t h = blockIdx.z, i0 = static_cast<int64_t>(blockIdx.y) * kScoreTile,
                  j0 = static_cast<int64_t>(blockIdx.x) * kScoreTile;
    const float* qh = q + h * n * d;
    const float* kh = k + h * n * d;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t d0 = 0; d0 < d; d0 += kScoreTile) {
        for (int e = ty * kScoreTile + tx; e < kScoreTile * kScoreTile; e += kScoreTile * 8) {
            const int r = e / kScoreTile, c = e % kScoreTile;
            const bool in_d = d0 + c < d;
            qs[r][c] = (i0 + r < n && in_d) ? qh[(i0 + r) * d + d0 + c] : 0.0f;
            ks[r][c] = (j0 + r < n && in_d) ? kh[(j0 + r) * d + d0 + c] : 0.0f;
        }
        __syncthreads();
        const int len = d - d0 < kScoreTile ? static_cast<int>(d - d0) : kScoreTile;
        for (int c = 0; c < len; ++c) {
            const float kv = ks[tx][c];
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[r] = __fadd_rn(acc[r], __fmul_rn(qs[ty + 8 * r][c], kv));
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int64_t i = i0 + ty + 8 * r, j = j0 + tx;
        if (i < n && j < n) scores[(h * n + i) * n + j] = __fdiv_rn(acc[r], div);
    }
}

// ---- selection: one block per (video query tile, head) ---------------------------------------------------
constexpr int kSelectThreads = 256;

// Larger score → larger key; NaN ranks as −inf and −0 as +0 (the CPU reference compares values).
__device__ __forceinline__ uint32_t order_key(float s) {
    if (isnan(s)) s = -INFINITY;
    if (s == 0.0f) s = 0.0f;
    const uint32_t b = __float_as_uint(s);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

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

// ---- compression branch: one block per (8 query tiles, head); the 8 softmax rows share each v̄ load --------
constexpr int kCompressThreads = 128;
constexpr int kCompressRows = 8;

__device__ __forceinline__ float block_max(float v, float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = -INFINITY;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) r = fmaxf(r, red[w]);
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(kCompressThreads)
    vsa_compress_kernel(const float* __restrict__ scores, const float* __restrict__ vp,
                        float* __restrict__ oc, int64_t n, int64_t d) {
    extern __shared__ float prob[]; // [kCompressRows][n]
    __shared__ float red[kCompressThreads / 32];
    const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kCompressRows, h = blockIdx.y;
    const int rows = static_cast<int>(n - i0 < kCompressRows ? n - i0 : kCompressRows);
    for (int r = 0; r < rows; ++r) {
        const float* row = scores + (h * n + i0 + r) * n;
        float* pr = prob + r * n;
        float mx = -INFINITY;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, row[j]);
        mx = block_max(mx, red);
        float sum = 0.0f;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            const float e = expf(row[j] - mx);
            pr[j] = e;
            sum += e;
        }
        sum = block_sum(sum); // also orders the pr[] writes before the reads below
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) pr[j] = pr[j] / sum;
    }
    __syncthreads();
    const float* vh = vp + h * n * d;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
        float acc[kCompressRows];
#pragma unroll
        for (int r = 0; r < kCompressRows; ++r) acc[r] = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
            const float vj = vh[j * d + c];
#pragma unroll
            for (int r = 0; r < kCompressRows; ++r)
                acc[r] = __fadd_rn(acc[r], __fmul_rn(prob[r * n + j], vj));
        }
        for (int r = 0; r < rows; ++r) oc[(h * n + i0 + r) * d + c] = acc[r];
    }
}

// ---- gate add: elementwise over [rows, H, D] ------------------------------------------------------------
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
        float cv = oc[(h * tiles + tile) * d + c];
        if (round) cv = round_to<T>(cv);
        float prod = __fmul_rn(cv, to_f32(gate[idx]));
        if (round) prod = round_to<T>(prod);
        o[idx] = from_f32<T>(__fadd_rn(to_f32(o[idx]), prod));
    }
}

Status set_smem(const void* kernel, size_t bytes, const char* what) {
    if (bytes <= 48 * 1024) return ok_status();
    return cuda_status(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        what);
}

} // namespace

Status vsa_pool(const Context& ctx, const VsaTiles& tiles, const Tensor& x, Tensor& out) {
    const int64_t H = x.dim(1), D = x.dim(2), n = tiles.num_tiles();
    const int threads = D >= 128 ? 128 : (D >= 64 ? 64 : 32);
    return dispatch_float(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        vsa_pool_kernel<T>
            <<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(H)), threads, 0, stream_of(ctx)>>>(
                x.data_as<const T>(), tiles.slot_rows.data_as<const int32_t>(),
                tiles.tile_sizes.data_as<const int32_t>(), out.data_as<float>(), H, D, n);
        return check_launch("vsa_pool");
    });
}

Status vsa_tile_scores(const Context& ctx, const Tensor& q, const Tensor& k, Tensor& scores) {
    const int64_t H = q.dim(0), n = q.dim(1), D = q.dim(2);
    const unsigned blocks = static_cast<unsigned>((n + kScoreTile - 1) / kScoreTile);
    vsa_scores_kernel<<<dim3(blocks, blocks, static_cast<unsigned>(H)), dim3(kScoreTile, 8), 0,
                        stream_of(ctx)>>>(q.data_as<const float>(), k.data_as<const float>(),
                                          scores.data_as<float>(), n, D, sqrtf(static_cast<float>(D)));
    return check_launch("vsa_tile_scores");
}

Status vsa_select(const Context& ctx, const VsaSelectParams& p, const VsaTiles& tiles, const Tensor& scores,
                  Tensor& lists) {
    const int64_t H = scores.dim(0), n = tiles.num_tiles(), P = tiles.num_prefix_tiles,
                  nv = tiles.num_video_tiles;
    const bool exempt = !p.compete || P == 0;
    const int64_t width = vsa_select_width(p, P, n), first = exempt ? P : 0, take = exempt ? p.keep : width;
    const size_t smem = static_cast<size_t>(n - first) * sizeof(uint32_t);
    H3_TRY(
        set_smem(reinterpret_cast<const void*>(vsa_select_kernel), smem, "cudaFuncSetAttribute(vsa_select)"));
    vsa_select_kernel<<<dim3(static_cast<unsigned>(nv), static_cast<unsigned>(H)), kSelectThreads, smem,
                        stream_of(ctx)>>>(scores.data_as<const float>(), lists.data_as<int32_t>(), n, P, nv,
                                          width, first, take, exempt);
    return check_launch("vsa_select");
}

Status vsa_compress_tiles(const Context& ctx, const Tensor& scores, const Tensor& vp, Tensor& oc) {
    const int64_t H = scores.dim(0), n = scores.dim(1), D = vp.dim(2);
    const size_t smem = static_cast<size_t>(kCompressRows * n) * sizeof(float);
    H3_TRY(set_smem(reinterpret_cast<const void*>(vsa_compress_kernel), smem,
                    "cudaFuncSetAttribute(vsa_compress_tiles)"));
    const unsigned blocks = static_cast<unsigned>((n + kCompressRows - 1) / kCompressRows);
    vsa_compress_kernel<<<dim3(blocks, static_cast<unsigned>(H)), kCompressThreads, smem, stream_of(ctx)>>>(
        scores.data_as<const float>(), vp.data_as<const float>(), oc.data_as<float>(), n, D);
    return check_launch("vsa_compress_tiles");
}

Status vsa_gate_add(const Context& ctx, const VsaGateAddParams& p, const VsaTiles& tiles, const Tensor& oc,
                    const Tensor& gate, Tensor& o) {
    const int64_t S = o.dim(0), H = o.dim(1), D = o.dim(2), n = tiles.num_tiles();
    return dispatch_float(o.dtype(), [&](auto to) {
        using T = typename decltype(to)::type;
        return dispatch_float(gate.dtype(), [&](auto tg) {
            using G = typename decltype(tg)::type;
            vsa_gate_add_kernel<T, G><<<grid_for(S * H * D, 256), 256, 0, stream_of(ctx)>>>(
                oc.data_as<const float>(), gate.data_as<const G>(), o.data_as<T>(),
                tiles.row_tiles.data_as<const int32_t>(), S, H, D, n, p.round_intermediate);
            return check_launch("vsa_gate_add");
        });
    });
}

} // namespace h3::ops::cuda_impl
