// Host helpers for the Hopper kernels (plain C++): TMA tensor maps and whether sm_90a code can run here.
#pragma once

#include "core/status.h"
#include "ops/context.h"

#include <cuda.h>

#include <cstdint>

namespace h3::ops::cuda_detail {

// A tensor map over a strided tensor: dims[0] innermost (contiguous, in elements), strides in bytes for
// dims[1..rank-1], box in elements; 128-byte swizzle by default, or 64-byte (box[0] · element size must be
// at most the swizzle width); elements outside the tensor read as 0.
struct TmaDims {
    int rank = 0;
    uint64_t dims[5] = {};
    uint64_t strides[4] = {};
    uint32_t box[5] = {};
    CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
};
Status make_tensor_map(CUtensorMap& map, CUtensorMapDataType type, const void* base, const TmaDims& d);

// True when this build holds sm_90a code and `ctx`'s device is compute capability 9.x (H100/H200).
bool hopper_kernels_usable(const Context& ctx);

} // namespace h3::ops::cuda_detail
