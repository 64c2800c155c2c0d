// The arguments of the one-block-per-row RMSNorm kernels (norm.cu's row_norm_kernel and the fused fp8 norm in
// fp8_fused.cu), built in one place so both read a row, its weight and its modulation tables the same way,
// and the row's 1/rms both compute (row_inv_rms), so both sum a row's squares in the same order.
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

#ifdef __CUDACC__
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
#endif

} // namespace h3::ops::cuda_impl
