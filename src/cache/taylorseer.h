// Cache-DiT's TaylorSeer calibrator (caches.md §2.7) over fp32 tensors on the model's device: backward
// finite differences of the middle residual at computed steps, Taylor extrapolation at cached ones.
// Buffers are allocated once per shape and reused (the derivative sets swap storage between steps).
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

#include <vector>

namespace h3::cache {

class TaylorSeer {
public:
    explicit TaylorSeer(int order);
    void mark_step_begin() { ++current_step_; }
    // A computed step's value y (any float dtype, copied): dY[0] = y, dY[k+1] = (dY[k] − dY_prev[k]) / gap.
    Status update(const ops::Context& ctx, const Tensor& y);
    // out (fp32, y's shape) = Σ_k dY[k]·e^k/k!, e = steps since the last full step.
    Status approximate(const ops::Context& ctx, Tensor& out) const;
    bool ready() const { return n_cur_ > 0; }
    int derivatives_available() const { return n_cur_; }
    size_t bytes() const;
    void reset();

private:
    int order_;
    int current_step_ = -1, last_full_step_ = -1;
    std::vector<Tensor> d_prev_, d_cur_; // order+1 slots each; the first n_* hold valid derivatives
    int n_prev_ = 0, n_cur_ = 0;
};

} // namespace h3::cache
