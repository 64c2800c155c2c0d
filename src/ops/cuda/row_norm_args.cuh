// The arguments of the one-block-per-row RMSNorm kernels (norm.cu's row_norm_kernel and
// gated_residual_norm_kernel, and the fused fp8 norms in fp8_fused.cu), built in one place so both read a
// row, its weight and its tables the same way, and the arithmetic both run (row_inv_rms, the gated residual's
// update and its norm), so both sum a row's squares in the same order and round where the other rounds.
#pragma once

#include "core/tensor.h"
#include "ops/adaln.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/norm.h"

namespace h3::ops::cuda_impl {

struct RowNormArgs {
    int64_t rows, d;
    float eps;
    bool round_normed;
    const void* weight; // nullptr: plain norm
    int weight_type;
    // modulate (rms_norm_modulate only)
    const void* shift;
    const void* scale;
    int table_type;
    int64_t shift_pitch, scale_pitch, table_rows;
    const void* row;
    bool row64;
    bool round_intermediate;
};

// rms_norm's arguments for x [rows, d] (d its last dim) and the weight (or undefined).
inline RowNormArgs norm_args(const RmsNormParams& np, const Tensor& x, const Tensor& weight) {
    RowNormArgs a{};
    a.d = x.dim(-1);
    a.rows = a.d == 0 ? 0 : x.numel() / a.d;
    a.eps = np.eps;
    a.round_normed = np.round_normed;
    if (weight.defined()) a.weight = weight.data(), a.weight_type = static_cast<int>(weight.dtype());
    return a;
}

// rms_norm_modulate's: norm_args plus the shift / scale tables (one dtype, the caller checks) and the row
// index.
inline RowNormArgs modulate_norm_args(const RmsNormParams& np, const ModulateParams& mp, const Tensor& x,
                                      const Tensor& weight, const Tensor& shift, const Tensor& scale,
                                      const Tensor& row) {
    RowNormArgs a = norm_args(np, x, weight);
    a.shift = shift.data();
    a.scale = scale.data();
    a.table_type = static_cast<int>(shift.dtype());
    a.shift_pitch = shift.stride(0);
    a.scale_pitch = scale.stride(0);
    a.table_rows = shift.dim(0) < scale.dim(0) ? shift.dim(0) : scale.dim(0);
    a.row = row.data();
    a.row64 = row.dtype() == DType::kI64;
    a.round_intermediate = mp.round_intermediate;
    return a;
}

// Whether x, the weight and the tables allow 8-element accesses (the output is the caller's to check).
inline bool modulate_norm_vec8(const RowNormArgs& a, const Tensor& x, const Tensor& weight,
                               const Tensor& shift, const Tensor& scale) {
    return a.d % 8 == 0 && cuda_detail::pointer_alignment(x.data()) >= 16 &&
           (!weight.defined() || cuda_detail::pointer_alignment(weight.data()) >= 16) &&
           cuda_detail::table_vec8_ok(shift) && cuda_detail::table_vec8_ok(scale);
}

// gated_residual_rms_norm's arguments (h += gate[row]·y, then the norm of the updated h). y may alias the
// norm's output.
struct GatedNormArgs {
    int64_t rows, d;
    const void* gate;
    int gate_type;
    int64_t gate_pitch, table_rows;
    const void* row;
    bool row64, round_intermediate;
    const void* y; // may alias out
    int y_type;
    float eps;
    bool round_normed;
    const void* weight; // nullptr: plain norm
    int weight_type;
};

inline GatedNormArgs gated_norm_args(const GatedResidualParams& gp, const RmsNormParams& np, const Tensor& h,
                                     const Tensor& gate, const Tensor& y, const Tensor& row,
                                     const Tensor& norm_weight) {
    GatedNormArgs a{};
    a.d = h.dim(-1);
    a.rows = a.d == 0 ? 0 : h.numel() / a.d;
    a.gate = gate.data();
    a.gate_type = static_cast<int>(gate.dtype());
    a.gate_pitch = gate.stride(0);
    a.table_rows = gate.dim(0);
    a.row = row.data();
    a.row64 = row.dtype() == DType::kI64;
    a.round_intermediate = gp.round_intermediate;
    a.y = y.data();
    a.y_type = static_cast<int>(y.dtype());
    a.eps = np.eps;
    a.round_normed = np.round_normed;
    if (norm_weight.defined())
        a.weight = norm_weight.data(), a.weight_type = static_cast<int>(norm_weight.dtype());
    return a;
}

// Whether h, y, the gate table and the weight allow 8-element accesses (the output is the caller's to check).
inline bool gated_norm_vec8(const GatedNormArgs& a, const Tensor& h, const Tensor& gate, const Tensor& y,
                            const Tensor& norm_weight) {
    return a.d % 8 == 0 && cuda_detail::pointer_alignment(h.data()) >= 16 &&
           cuda_detail::pointer_alignment(y.data()) >= 16 && cuda_detail::table_vec8_ok(gate) &&
           (!norm_weight.defined() || cuda_detail::pointer_alignment(norm_weight.data()) >= 16);
}

// The gated residual norm's launch shape, threads ≤ 256: iters is the chunks (N elements each) each thread
// keeps in registers between the residual and the norm (1, 2 or 4: rows of up to 8192 (N = 8) or 1024 (N = 1)
// elements), or 0 for a wider row, whose kernel reads back the h each thread stored. Either way thread i
// handles chunks i, i + threads, ... in that order, so every row sums its squares the same way.
struct GatedNormPlan {
    int iters = 0, threads = 0;
};
inline GatedNormPlan gated_norm_plan(int64_t d, bool vec) {
    const int64_t chunks = vec ? d / 8 : d;
    GatedNormPlan p;
    p.iters = chunks <= 256 ? 1 : (chunks <= 512 ? 2 : (chunks <= 1024 ? 4 : 0));
    p.threads = cuda_detail::row_block(p.iters > 0 ? (chunks + p.iters - 1) / p.iters : chunks);
    return p;
}

#ifdef __CUDACC__
// h + gate·y as stored in h's dtype TH (the product rounded to TH first with round_intermediate). Explicit
// roundings (no contraction into an fma), so every kernel that calls it computes the same h.
template <typename TH>
__device__ __forceinline__ float gated_residual_value(float h, float g, float y, bool round_intermediate) {
    float m = __fmul_rn(g, y);
    if (round_intermediate) m = cuda_detail::round_to<TH>(m);
    return cuda_detail::round_to<TH>(__fadd_rn(h, m));
}

// The norm of one element of the updated h (1/rms `inv`), before the store rounds it to the output dtype TO.
template <typename TO>
__device__ __forceinline__ float gated_norm_value(const GatedNormArgs& a, float h, float inv, float w) {
    float n = __fmul_rn(h, inv);
    if (a.round_normed) n = cuda_detail::round_to<TO>(n);
    if (a.weight) n = __fmul_rn(n, w);
    return n;
}

// 1/rms of the row xr[0, d): each thread sums the squares of its N-element chunks (thread t takes chunks t,
// t + blockDim.x, ...; one fma per element, in order), then block_sum. Every thread of the block calls it
// and gets the value.
template <int N, typename TX>
__device__ __forceinline__ float row_inv_rms(const TX* xr, int64_t d, float eps) {
    float ss = 0.0f;
    for (int64_t c = threadIdx.x * static_cast<int64_t>(N); c < d;
         c += blockDim.x * static_cast<int64_t>(N)) {
        float v[N];
        cuda_detail::load_vec<N>(xr + c, v);
#pragma unroll
        for (int j = 0; j < N; ++j) ss = __fmaf_rn(v[j], v[j], ss);
    }
    ss = cuda_detail::block_sum(ss);
    return 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
}

// h += gate[t]·y on row r (hr = h + r·d) in row_inv_rms's chunk order, storing each updated chunk, then the
// 1/rms of the stored row (block_sum: every thread of the block calls it and gets the value; a thread reads
// back only chunks it stored itself, or any after the barrier).
template <int N, typename TH>
__device__ __forceinline__ float gated_residual_row(TH* hr, const GatedNormArgs& a, int64_t r, int64_t t) {
    float ss = 0.0f;
    for (int64_t c = threadIdx.x * static_cast<int64_t>(N); c < a.d;
         c += blockDim.x * static_cast<int64_t>(N)) {
        float hv[N], g[N], yv[N];
        cuda_detail::load_vec<N>(hr + c, hv);
        cuda_detail::load_vec_any<N>(a.gate, a.gate_type, t * a.gate_pitch + c, g);
        cuda_detail::load_vec_any<N>(a.y, a.y_type, r * a.d + c, yv);
#pragma unroll
        for (int j = 0; j < N; ++j) {
            hv[j] = gated_residual_value<TH>(hv[j], g[j], yv[j], a.round_intermediate);
            ss = __fmaf_rn(hv[j], hv[j], ss);
        }
        cuda_detail::store_vec<N>(hr + c, hv);
    }
    ss = cuda_detail::block_sum(ss);
    return 1.0f / sqrtf(ss / static_cast<float>(a.d) + a.eps);
}
#endif

} // namespace h3::ops::cuda_impl
