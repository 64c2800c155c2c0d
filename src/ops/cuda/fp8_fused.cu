// Producers fused with the fp8 row quantization (ops/fp8_fused.h) on CUDA. One block per row: the
// producer's bf16 values, rounded where its own kernel rounds them, go to shared memory (2 bytes an element,
// exact: they are bf16 values); the block reduces the row's max |value| and writes the e4m3 bytes and the
// power-of-two scale as quantize_rows_fp8's kernels do (gemm_fp8.cu: v·(1/scale), cvt.rn.satfinite). Rows
// wider than the shared-memory stash compute their values a second time instead (the same arithmetic, so
// the same values).
//
// Bitwise equal to the composition on CUDA (the producer's kernel into a bf16 tensor, then quantize_rows_fp8)
// by design: swiglu's values use swiglu_kernel's expression (silu_f, cuda_kernels.cuh); the norms' 1/rms is
// row_norm_kernel's (row_inv_rms in row_norm_args.cuh, with the same block size row_block()), and every later
// rounding is spelled out (__fmul_rn, __fadd_rn) as the separate mul/add row_norm_kernel compiles to (its
// sm_90a SASS: FMUL then FADD, no FFMA, after the sum of squares), so no contraction can differ. The gated
// residual + norm calls the device functions gated_residual_norm_kernel calls (row_norm_args.cuh), with its
// block size and chunk order (gated_norm_plan), so h, the sum of squares and the values are that kernel's.
// The row max is exact in any order, and the scale and bytes are quantize_rows_fp8's. tests/test_ops_fp8.cpp
// compares the bytes exactly.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/row_norm_args.cuh"
#include "ops/cuda/vsa_gate_add.cuh"
#include "ops/fp8_scale.h"

#include <type_traits>

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

// Rows of up to this many bytes of bf16 stay in shared memory: 20480 elements, past the DiT's widths (5376,
// 14336), and within the 48 KiB a block gets without opting in, with room for the reductions' static shared
// memory.
constexpr int64_t kStashBytes = 40 * 1024;

// Max over the block (blockDim.x a multiple of 32, <= 1024); every thread gets it. fmaxf is exact, so the
// order does not matter, and like quantize_rows_fp8's reduction it drops NaNs.
__device__ __forceinline__ float block_max(float v) {
    __shared__ float partial[32];
    __shared__ float total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float m = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0f;
        m = warp_max(m);
        if (lane == 0) total = m;
    }
    __syncthreads();
    const float r = total;
    __syncthreads(); // `partial`/`total` are reused by the next row
    return r;
}

// v·inv rounded to e4m3 (nearest even, saturating) into the N bytes at p; one 8-byte store when `vec`.
template <int N>
__device__ __forceinline__ void store_e4m3(uint8_t* p, const float (&v)[N], float inv, bool vec) {
    if constexpr (N == 8) {
        if (vec) {
            uint32_t w[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(
                    make_float2(v[4 * h] * inv, v[4 * h + 1] * inv), __NV_SATFINITE, __NV_E4M3);
                const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(
                    make_float2(v[4 * h + 2] * inv, v[4 * h + 3] * inv), __NV_SATFINITE, __NV_E4M3);
                w[h] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
            }
            *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
            return;
        }
    }
#pragma unroll
    for (int j = 0; j < N; ++j) p[j] = __nv_cvt_float_to_fp8(v[j] * inv, __NV_SATFINITE, __NV_E4M3);
}

// rms_norm (kModulate false: row_norm_kernel<N, false, TX, bf16>'s arguments) or rms_norm_modulate
// (kModulate true, TX bf16: row_norm_kernel<N, true, bf16, bf16>'s) into a bf16 y.
template <typename TX, bool kModulate> struct NormProducer {
    static_assert(!kModulate || std::is_same_v<TX, bf16>, "rms_norm_modulate_fp8 reads bf16 x");
    const TX* x;
    RowNormArgs a;
    // the current row: x's row, its table row and 1/rms
    const TX* xr;
    int64_t trow;
    float inv;

    // Sets up row r (every thread of the block calls it); false: the row is skipped (an index outside the
    // tables, uniform across the block).
    template <int N> __device__ __forceinline__ bool begin_row(int64_t r) {
        if constexpr (kModulate) {
            trow = load_index(a.row, a.row64, r);
            if (trow < 0 || trow >= a.table_rows) return false;
        }
        xr = x + r * a.d;
        inv = row_inv_rms<N>(xr, a.d, a.eps);
        return true;
    }

    // The bf16 values y[c, c + N) of the current row.
    template <int N> __device__ __forceinline__ void values(int64_t c, float (&v)[N]) const {
        float w[N];
        load_vec<N>(xr + c, v);
        if (a.weight) load_vec_any<N>(a.weight, a.weight_type, c, w);
        if constexpr (!kModulate) {
#pragma unroll
            for (int j = 0; j < N; ++j) {
                float n = __fmul_rn(v[j], inv);
                if (a.round_normed) n = round_to<bf16>(n); // the norm's output dtype: y's
                if (a.weight) n = __fmul_rn(n, w[j]);
                v[j] = round_to<bf16>(n);
            }
        } else {
            float sh[N], sc[N];
            load_vec_any<N>(a.shift, a.table_type, trow * a.shift_pitch + c, sh);
            load_vec_any<N>(a.scale, a.table_type, trow * a.scale_pitch + c, sc);
#pragma unroll
            for (int j = 0; j < N; ++j) {
                float n = __fmul_rn(v[j], inv);
                if (a.round_normed) n = round_to<bf16>(n); // the norm's output dtype: x's
                if (a.weight) n = __fmul_rn(n, w[j]);
                float one_plus = __fadd_rn(1.0f, sc[j]);
                if (a.round_intermediate) one_plus = round_to<bf16>(one_plus);
                float t = __fmul_rn(round_to<bf16>(n), one_plus);
                if (a.round_intermediate) t = round_to<bf16>(t);
                v[j] = round_to<bf16>(__fadd_rn(t, sh[j]));
            }
        }
    }
};

// gated_residual_rms_norm with out bf16 (gated_residual_norm_kernel<N, kIters, TH, bf16>'s arguments):
// begin_row updates the row of h (as that kernel stores it) and sums its squares in that kernel's order
// (the launch passes that kernel's block size); values() reads the updated row back (each thread the
// chunks it wrote) and normalizes it.
template <typename TH> struct GatedNormProducer {
    TH* h;
    GatedNormArgs a;
    TH* hr; // the current row of h
    float inv;

    template <int N> __device__ __forceinline__ bool begin_row(int64_t r) {
        const int64_t t = load_index(a.row, a.row64, r);
        if (t < 0 || t >= a.table_rows) return false;
        hr = h + r * a.d;
        inv = gated_residual_row<N>(hr, a, r, t);
        return true;
    }

    template <int N> __device__ __forceinline__ void values(int64_t c, float (&v)[N]) const {
        float w[N];
        load_vec<N>(hr + c, v);
        if (a.weight) load_vec_any<N>(a.weight, a.weight_type, c, w);
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = round_to<bf16>(gated_norm_value<bf16>(a, v[j], inv, w[j]));
    }
};

// swiglu on bf16 rows h = [value | gate] of 2f elements.
struct SwigluProducer {
    const bf16* h;
    int64_t f;
    const bf16* hr; // the current row

    template <int N> __device__ __forceinline__ bool begin_row(int64_t r) {
        hr = h + r * 2 * f;
        return true;
    }

    template <int N> __device__ __forceinline__ void values(int64_t c, float (&v)[N]) const {
        float gate[N];
        load_vec<N>(hr + c, v);
        load_vec<N>(hr + f + c, gate);
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = round_to<bf16>(v[j] * silu_f(gate[j]));
    }
};

// VSA's compression gate add on bf16 rows o, gate [rows, heads·d] (vsa_gate_add_one, then o's bf16 rounding
// as vsa_gate_add stores it); oc [heads, tiles, d] f32. N divides d, so one access stays in one head. A row
// without a tile is o's row as it is.
struct VsaGateAddProducer {
    const bf16* o;
    const bf16* gate;
    const float* oc;
    const int32_t* row_tiles;
    int64_t d, tiles;
    bool round;
    const bf16* orow; // the current row's
    const bf16* grow;
    const float* ocrow; // oc[0, tile, :]; null: no tile
    int64_t cols;

    template <int N> __device__ __forceinline__ bool begin_row(int64_t r) {
        orow = o + r * cols;
        grow = gate + r * cols;
        const int32_t tile = row_tiles[r];
        ocrow = tile >= 0 && tile < tiles ? oc + static_cast<int64_t>(tile) * d : nullptr;
        return true;
    }

    template <int N> __device__ __forceinline__ void values(int64_t c, float (&v)[N]) const {
        load_vec<N>(orow + c, v);
        if (ocrow == nullptr) return;
        float g[N], cv[N];
        load_vec<N>(grow + c, g);
        const int64_t h = c / d;
        load_vec<N>(ocrow + h * tiles * d + (c - h * d), cv);
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = round_to<bf16>(vsa_gate_add_one<bf16>(v[j], cv[j], g[j], round));
    }
};

// One block per row of `cols` outputs, N per access (N == 8: cols % 8 == 0 and the producer's pointers
// 16-byte aligned; out_vec: out 8-byte aligned too). kStash: the row's values wait in dynamic shared memory
// (cols bf16) between the max and the quantization; otherwise the producer computes them again.
template <int N, bool kStash, typename P>
__global__ void __launch_bounds__(256)
    fp8_rows_kernel(P p, int64_t rows, int64_t cols, uint8_t* __restrict__ out, float* __restrict__ scale,
                    bool out_vec) {
    extern __shared__ uint4 stash_raw[];
    bf16* stash = reinterpret_cast<bf16*>(stash_raw);
    const int64_t first = threadIdx.x * static_cast<int64_t>(N), step = blockDim.x * static_cast<int64_t>(N);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        uint8_t* o = out + r * cols;
        if (!p.template begin_row<N>(r)) {
            for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = 0;
            if (threadIdx.x == 0) scale[r] = fp8_block_scale(0.0f);
            continue;
        }
        float amax = 0.0f;
        for (int64_t c = first; c < cols; c += step) {
            float v[N];
            p.template values<N>(c, v);
#pragma unroll
            for (int j = 0; j < N; ++j) amax = fmaxf(amax, fabsf(v[j]));
            if constexpr (kStash) store_vec<N>(stash + c, v);
        }
        const float s = fp8_block_scale(block_max(amax)), inv = 1.0f / s;
        if (threadIdx.x == 0) scale[r] = s;
        // Each thread reads back only the stash entries it wrote (the same chunks), so no barrier is needed
        // beyond block_max's.
        for (int64_t c = first; c < cols; c += step) {
            float v[N];
            if constexpr (kStash)
                load_vec<N>(stash + c, v);
            else
                p.template values<N>(c, v);
            store_e4m3<N>(o + c, v, inv, out_vec);
        }
    }
}

// threads: the block size (0: row_block(cols / N), the producers' own kernels' choice).
template <int N, typename P>
void launch_n(const Context& ctx, const P& p, int64_t rows, int64_t cols, uint8_t* out, float* scale,
              bool out_vec, int threads) {
    const unsigned grid = static_cast<unsigned>(rows < (1LL << 30) ? rows : (1LL << 30));
    if (threads == 0) threads = row_block(cols / N);
    const int64_t stash = (cols * static_cast<int64_t>(sizeof(bf16)) + 15) / 16 * 16;
    if (stash <= kStashBytes)
        fp8_rows_kernel<N, true><<<grid, threads, static_cast<size_t>(stash), stream_of(ctx)>>>(
            p, rows, cols, out, scale, out_vec);
    else
        fp8_rows_kernel<N, false><<<grid, threads, 0, stream_of(ctx)>>>(p, rows, cols, out, scale, out_vec);
}

// vec: the producer can read 8 elements an access (row_block then sees cols / 8 chunks, as the producer's own
// kernel does). threads: as launch_n.
template <typename P>
Status launch_fp8_rows(const Context& ctx, const P& p, int64_t rows, int64_t cols, bool vec,
                       Fp8Activation& out, const char* what, int threads = 0) {
    if (rows == 0 || cols == 0) return ok_status();
    uint8_t* o = out.data.data_as<uint8_t>();
    float* s = out.scale.data_as<float>();
    if (vec)
        launch_n<8>(ctx, p, rows, cols, o, s, pointer_alignment(o) >= 8, threads);
    else
        launch_n<1>(ctx, p, rows, cols, o, s, false, threads);
    return check_launch(what);
}

} // namespace

Status rms_norm_modulate_fp8(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                             const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                             const Tensor& row, Fp8Activation& out) {
    if (shift.dtype() != scale.dtype())
        return unimplemented("CUDA rms_norm_modulate_fp8: shift and scale tables must share a dtype");
    NormProducer<bf16, true> p{};
    p.x = x.data_as<const bf16>();
    p.a = modulate_norm_args(np, mp, x, weight, shift, scale, row);
    // rms_norm_modulate's choice for an aligned y, so that the sum of squares runs in the same order.
    const bool vec = modulate_norm_vec8(p.a, x, weight, shift, scale);
    return launch_fp8_rows(ctx, p, x.dim(0), p.a.d, vec, out, "rms_norm_modulate_fp8");
}

Status rms_norm_fp8(const Context& ctx, const RmsNormParams& np, const Tensor& x, const Tensor& weight,
                    Fp8Activation& out) {
    const RowNormArgs a = norm_args(np, x, weight);
    // rms_norm's choice for an aligned y, so that the sum of squares runs in the same order.
    const bool vec = a.d % 8 == 0 && pointer_alignment(x.data()) >= 16 &&
                     (!weight.defined() || pointer_alignment(weight.data()) >= 16);
    return dispatch_float(x.dtype(), [&](auto tx) {
        using TX = typename decltype(tx)::type;
        NormProducer<TX, false> p{};
        p.x = x.data_as<const TX>();
        p.a = a;
        return launch_fp8_rows(ctx, p, a.rows, a.d, vec, out, "rms_norm_fp8");
    });
}

Status gated_residual_rms_norm_fp8(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                                   Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                                   const Tensor& norm_weight, Fp8Activation& out) {
    const GatedNormArgs a = gated_norm_args(gp, np, h, gate, y, row, norm_weight);
    if (a.rows == 0 || a.d == 0) return ok_status();
    // gated_residual_rms_norm's choices for an aligned out (its vector width and block size), so that the sum
    // of squares runs in the same order.
    const bool vec = gated_norm_vec8(a, h, gate, y, norm_weight);
    const GatedNormPlan plan = gated_norm_plan(a.d, vec);
    return dispatch_float(h.dtype(), [&](auto th) {
        using TH = typename decltype(th)::type;
        GatedNormProducer<TH> p{};
        p.h = h.data_as<TH>();
        p.a = a;
        return launch_fp8_rows(ctx, p, a.rows, a.d, vec, out, "gated_residual_rms_norm_fp8", plan.threads);
    });
}

Status vsa_gate_add_fp8(const Context& ctx, const VsaGateAddParams& gp, const VsaTiles& tiles,
                        const Tensor& oc, const Tensor& gate, const Tensor& o, Fp8Activation& out) {
    VsaGateAddProducer p{};
    p.o = o.data_as<const bf16>();
    p.gate = gate.data_as<const bf16>();
    p.oc = oc.data_as<const float>();
    p.row_tiles = tiles.row_tiles.data_as<const int32_t>();
    p.d = o.dim(2);
    p.tiles = tiles.num_tiles();
    p.round = gp.round_intermediate;
    p.cols = o.dim(1) * o.dim(2);
    const bool vec = p.d % 8 == 0 && pointer_alignment(o.data()) >= 16 &&
                     pointer_alignment(gate.data()) >= 16 && pointer_alignment(oc.data()) >= 16;
    return launch_fp8_rows(ctx, p, o.dim(0), p.cols, vec, out, "vsa_gate_add_fp8");
}

Status swiglu_fp8(const Context& ctx, const Tensor& h, Fp8Activation& out) {
    SwigluProducer p{};
    p.h = h.data_as<const bf16>();
    p.f = h.dim(1) / 2;
    const bool vec = p.f % 8 == 0 && pointer_alignment(h.data()) >= 16;
    return launch_fp8_rows(ctx, p, h.dim(0), p.f, vec, out, "swiglu_fp8");
}

} // namespace h3::ops::cuda_impl
