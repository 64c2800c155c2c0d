// CUDA half of fill_uniform: the shared counter-based formula (ops/random.h), grid-stride loop.
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_context.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/random.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace h3::ops::cuda_impl {

namespace {

template <typename T> __device__ T from_float(float v);
template <> __device__ float from_float<float>(float v) {
    return v;
}
template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}
template <> __device__ __half from_float<__half>(float v) {
    return __float2half_rn(v);
}

template <typename T>
__global__ void fill_uniform_kernel(T* x, int64_t n, uint64_t seed, float bound, float offset) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        x[i] = from_float<T>(uniform_value(seed, static_cast<uint64_t>(i), bound, offset));
}

} // namespace

Status fill_uniform(const Context& ctx, const FillUniformParams& p, Tensor& x) {
    const int64_t n = x.numel();
    if (n == 0) return ok_status();
    cudaStream_t s = static_cast<cudaStream_t>(ctx.stream());
    const int threads = 256;
    const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65536));
    switch (x.dtype()) {
    case DType::kF32:
        fill_uniform_kernel<<<blocks, threads, 0, s>>>(x.data_as<float>(), n, p.seed, p.bound, p.offset);
        break;
    case DType::kBF16:
        fill_uniform_kernel<<<blocks, threads, 0, s>>>(x.data_as<__nv_bfloat16>(), n, p.seed, p.bound,
                                                       p.offset);
        break;
    case DType::kF16:
        fill_uniform_kernel<<<blocks, threads, 0, s>>>(x.data_as<__half>(), n, p.seed, p.bound, p.offset);
        break;
    default:
        return invalid_argument("fill_uniform: unsupported dtype");
    }
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return internal_error(std::string("fill_uniform launch: ") + cudaGetErrorString(err));
    return ok_status();
}

} // namespace h3::ops::cuda_impl
