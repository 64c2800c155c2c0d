// CUDA attention_merge (ops/attention_merge.h): one warp per (row, head); its lanes read the lse pair,
// then mix the D channels (coalesced), and lane 0 writes the merged lse after the warp has read the inputs
// (so lse may be lse_a in place). fp32 math, one rounding at the store. A side with lse −inf is not read,
// so an empty partial may hold anything.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kWarpsPerBlock = 8;

template <typename TO>
__global__ void attention_merge_kernel(const void* o_a, int a_dtype, const float* lse_a, const void* o_b,
                                       int b_dtype, const float* lse_b, TO* o, float* lse, int64_t rows,
                                       int64_t d) {
    const int lane = threadIdx.x & 31;
    const int64_t r = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + (threadIdx.x >> 5);
    if (r >= rows) return; // whole warps leave together
    const float xa = lse_a[r], xb = lse_b[r], m = fmaxf(xa, xb);
    const bool empty = m == -INFINITY;
    const float wa = empty || xa == -INFINITY ? 0.0f : expf(xa - m);
    const float wb = empty || xb == -INFINITY ? 0.0f : expf(xb - m);
    const float inv = empty ? 0.0f : 1.0f / (wa + wb);
    __syncwarp(); // every lane holds xa/xb before lane 0 may overwrite lse[r] (lse may alias lse_a)
    for (int64_t c = lane; c < d; c += 32) {
        const int64_t i = r * d + c;
        const float va = wa > 0.0f ? wa * load_any(o_a, a_dtype, i) : 0.0f;
        const float vb = wb > 0.0f ? wb * load_any(o_b, b_dtype, i) : 0.0f;
        o[i] = from_f32<TO>(empty ? 0.0f : (va + vb) * inv);
    }
    if (lse && lane == 0) lse[r] = empty ? -INFINITY : m + logf(wa + wb);
}

} // namespace

Status attention_merge(const Context& ctx, const Tensor& o_a, const Tensor& lse_a, const Tensor& o_b,
                       const Tensor& lse_b, Tensor& o, Tensor& lse) {
    const int64_t rows = o_a.dim(0) * o_a.dim(1), d = o_a.dim(2);
    if (rows == 0 || d == 0) return ok_status();
    const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
    return dispatch_float(o.dtype(), [&](auto to) {
        using TO = typename decltype(to)::type;
        attention_merge_kernel<TO><<<blocks, kWarpsPerBlock * 32, 0, stream_of(ctx)>>>(
            o_a.data(), static_cast<int>(o_a.dtype()), lse_a.data_as<const float>(), o_b.data(),
            static_cast<int>(o_b.dtype()), lse_b.data_as<const float>(), o.data_as<TO>(),
            lse.defined() ? lse.data_as<float>() : nullptr, rows, d);
        return check_launch("attention_merge");
    });
}

} // namespace h3::ops::cuda_impl
