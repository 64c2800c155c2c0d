// Counter-based random fill (benches, random full-width weights generated where they live): element i gets
// bound · (2u − 1) with u = the top 24 bits of hash(seed, i) / 2^24, so the CPU and CUDA halves agree
// exactly, in any order, for any tensor size.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

#include <cstdint>

namespace h3::ops {

struct FillUniformParams {
    uint64_t seed = 0;
    float bound = 1.0f;  // values in [−bound, bound)
    float offset = 0.0f; // added after scaling (e.g. 1 for norm weights)
};
// x contiguous, f32/bf16/f16.
Status fill_uniform(const Context& ctx, const FillUniformParams& p, Tensor& x);

// The shared element formula (host and device).
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline float
    uniform_value(uint64_t seed, uint64_t i, float bound, float offset) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f); // exact: 24-bit integer / 2^24
    return bound * (2.0f * u - 1.0f) + offset;
}

} // namespace h3::ops
