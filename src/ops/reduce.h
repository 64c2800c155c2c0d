// Reductions whose result the host needs (step-cache decisions). See ops.h for the shared conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// Σ|cur − ref| and Σ|ref| over all elements, accumulated in double in a fixed order (the same inputs give
// the same sums on every run; CPU and CUDA agree to double rounding, not bit for bit).
struct L1Sums {
    double diff = 0; // Σ|cur − ref|
    double ref = 0;  // Σ|ref|
};
// cur and ref: same shape, contiguous, f32/bf16/f16 (dtypes may differ). Waits for the context's stream.
Result<L1Sums> l1_sums(const Context& ctx, const Tensor& cur, const Tensor& ref);

// Relative L1 distance Σ|cur − ref| / Σ|ref| (caches.md §1.2, §2.4); 0/0 → 0, x/0 → +inf.
Result<double> rel_l1(const Context& ctx, const Tensor& cur, const Tensor& ref);

} // namespace h3::ops
