// l1_sums: a fixed grid of blocks each sums a fixed grid-stride share in double, a second one-block pass adds
// the block partials in block order — deterministic for a given input size. The two sums come back with one
// small copy and a stream sync (the caller decides on the host).
#include "core/cuda_api.h"
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kBlock = 256;
constexpr int kMaxBlocks = 1024;

__device__ __forceinline__ void block_sum2(double& a, double& b, double* sa, double* sb) {
    const int t = threadIdx.x;
    sa[t] = a;
    sb[t] = b;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            sa[t] += sa[t + s];
            sb[t] += sb[t + s];
        }
        __syncthreads();
    }
    a = sa[0];
    b = sb[0];
}

template <typename TC, typename TR>
__global__ void l1_partials_kernel(const TC* __restrict__ cur, const TR* __restrict__ ref, int64_t n,
                                   double* __restrict__ partials) {
    __shared__ double sa[kBlock], sb[kBlock];
    double d = 0, m = 0;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const double c = to_f32(cur[i]), r = to_f32(ref[i]);
        d += fabs(c - r);
        m += fabs(r);
    }
    block_sum2(d, m, sa, sb);
    if (threadIdx.x == 0) {
        partials[2 * blockIdx.x] = d;
        partials[2 * blockIdx.x + 1] = m;
    }
}

__global__ void l1_final_kernel(const double* __restrict__ partials, int blocks, double* __restrict__ out) {
    __shared__ double sa[kBlock], sb[kBlock];
    double d = 0, m = 0;
    for (int i = threadIdx.x; i < blocks; i += blockDim.x) {
        d += partials[2 * i];
        m += partials[2 * i + 1];
    }
    block_sum2(d, m, sa, sb);
    if (threadIdx.x == 0) {
        out[0] = d;
        out[1] = m;
    }
}

} // namespace

Status l1_sums(const Context& ctx, const Tensor& cur, const Tensor& ref, L1Sums& out) {
    out = {};
    const int64_t n = cur.numel();
    if (n == 0) return ok_status();
    const int blocks = static_cast<int>(grid_for(n, kBlock, kMaxBlocks));
    H3_ASSIGN_OR_RETURN(void* scratch, ctx.cuda->scratch(sizeof(double) * (2 * blocks + 2)));
    auto* partials = static_cast<double*>(scratch);
    double* result = partials + 2 * blocks;
    H3_TRY(dispatch_float(cur.dtype(), [&](auto tc) {
        return dispatch_float(ref.dtype(), [&](auto tr) {
            using TC = typename decltype(tc)::type;
            using TR = typename decltype(tr)::type;
            l1_partials_kernel<<<blocks, kBlock, 0, stream_of(ctx)>>>(cur.data_as<const TC>(),
                                                                      ref.data_as<const TR>(), n, partials);
            return check_launch("l1_sums");
        });
    }));
    l1_final_kernel<<<1, kBlock, 0, stream_of(ctx)>>>(partials, blocks, result);
    H3_TRY(check_launch("l1_sums (final)"));
    double host[2] = {0, 0};
    H3_TRY(cuda::memcpy(host, result, sizeof(host), cuda::CopyKind::kDeviceToHost, ctx.stream()));
    H3_TRY(cuda::stream_synchronize(ctx.stream()));
    out.diff = host[0];
    out.ref = host[1];
    return ok_status();
}

} // namespace h3::ops::cuda_impl
