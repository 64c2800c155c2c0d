// CUDA sample_to_rgb8 (ops/frames.h): one thread per 4 consecutive pixels of the F·H·W pixel run (16-byte
// loads from each of the 3 planes, the 12 interleaved bytes stored as three 32-bit words) when the run and
// the pointers allow it, else one thread per pixel. The value math spelled with round-to-nearest intrinsics
// (no fma contraction) and rintf (half to even), so the bytes are the CPU reference's.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kBlock = 256;

struct Rgb8Args {
    const float* sample; // [3, n] planes, `plane` floats apart
    uint8_t* frames;     // [n, 3]
    int64_t n;           // pixels: F·H·W
    int64_t plane;       // floats from one channel plane to the next (n for a contiguous sample)
    float mean[3], stddev[3];
};

// The CPU reference's expression: v·stddev + mean (each rounded), max(0, ·) then min(1, ·) as std::max /
// std::min order them (NaN -> 0), then round half to even of v·255.
__device__ __forceinline__ uint32_t to_byte(float s, float sd, float mn) {
    float v = __fadd_rn(__fmul_rn(s, sd), mn);
    v = 0.0f < v ? v : 0.0f;
    v = v < 1.0f ? v : 1.0f;
    return static_cast<uint32_t>(rintf(__fmul_rn(v, 255.0f)));
}

__global__ void rgb8_kernel(const Rgb8Args a) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
#pragma unroll
        for (int c = 0; c < 3; ++c)
            a.frames[i * 3 + c] =
                static_cast<uint8_t>(to_byte(a.sample[c * a.plane + i], a.stddev[c], a.mean[c]));
    }
}

// n % 4 == 0, plane % 4 == 0, sample 16-byte and frames 4-byte aligned.
__global__ void rgb8_vec4_kernel(const Rgb8Args a) {
    const int64_t groups = a.n / 4;
    for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
         g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        uint32_t bytes[12];
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            const float4 s = reinterpret_cast<const float4*>(a.sample + c * a.plane)[g];
            bytes[0 * 3 + c] = to_byte(s.x, a.stddev[c], a.mean[c]);
            bytes[1 * 3 + c] = to_byte(s.y, a.stddev[c], a.mean[c]);
            bytes[2 * 3 + c] = to_byte(s.z, a.stddev[c], a.mean[c]);
            bytes[3 * 3 + c] = to_byte(s.w, a.stddev[c], a.mean[c]);
        }
        uint32_t* out = reinterpret_cast<uint32_t*>(a.frames + g * 12);
#pragma unroll
        for (int w = 0; w < 3; ++w)
            out[w] =
                bytes[4 * w] | (bytes[4 * w + 1] << 8) | (bytes[4 * w + 2] << 16) | (bytes[4 * w + 3] << 24);
    }
}

} // namespace

Status sample_to_rgb8(const Context& ctx, const SampleToRgb8Params& p, const Tensor& sample, Tensor& frames) {
    Rgb8Args a{};
    a.sample = sample.data_as<const float>();
    a.frames = frames.data_as<uint8_t>();
    a.n = sample.dim(1) * sample.dim(2) * sample.dim(3);
    a.plane = sample.stride(0);
    for (int c = 0; c < 3; ++c) {
        a.mean[c] = p.mean[static_cast<size_t>(c)];
        a.stddev[c] = p.stddev[static_cast<size_t>(c)];
    }
    if (a.n == 0) return ok_status();
    const cudaStream_t s = stream_of(ctx);
    if (a.n % 4 == 0 && a.plane % 4 == 0 && pointer_alignment(a.sample) >= 16 &&
        pointer_alignment(a.frames) >= 4)
        rgb8_vec4_kernel<<<grid_for(a.n / 4, kBlock), kBlock, 0, s>>>(a);
    else
        rgb8_kernel<<<grid_for(a.n, kBlock), kBlock, 0, s>>>(a);
    return check_launch("sample_to_rgb8");
}

} // namespace h3::ops::cuda_impl
