#include "cache/taylorseer.h"

#include "cache/buffers.h"
#include "ops/elementwise.h"

namespace h3::cache {

TaylorSeer::TaylorSeer(int order) : order_(order) {
    d_prev_.resize(static_cast<size_t>(order_ + 1));
    d_cur_.resize(static_cast<size_t>(order_ + 1));
}

void TaylorSeer::reset() {
    current_step_ = -1;
    last_full_step_ = -1;
    n_prev_ = n_cur_ = 0;
}

Status TaylorSeer::update(const ops::Context& ctx, const Tensor& y) {
    std::swap(d_prev_, d_cur_); // the old current set becomes the previous one; its storage is reused
    n_prev_ = n_cur_;
    n_cur_ = 0;
    if (n_prev_ > 0 && !has_shape(d_prev_[0], y.shape())) n_prev_ = 0; // shape changed: start afresh
    const float gap = static_cast<float>(current_step_ - last_full_step_);
    H3_TRY(copy_as_f32(ctx, y, d_cur_[0]));
    n_cur_ = 1;
    for (int k = 0; k < order_; ++k) {
        if (k >= n_prev_ || current_step_ <= 1) break;
        const auto i = static_cast<size_t>(k);
        H3_TRY(ensure_f32(ctx, y.shape(), d_cur_[i + 1]));
        H3_TRY(ops::axpby(ctx, 1.0f / gap, d_cur_[i], -1.0f / gap, d_prev_[i], d_cur_[i + 1]));
        n_cur_ = k + 2;
    }
    last_full_step_ = current_step_;
    return ok_status();
}

Status TaylorSeer::approximate(const ops::Context& ctx, Tensor& out) const {
    if (n_cur_ == 0) return internal_error("TaylorSeer::approximate before any update");
    const double e = current_step_ - last_full_step_;
    H3_TRY(copy_as_f32(ctx, d_cur_[0], out));
    double factor = 1; // e^k / k!
    for (int k = 1; k < n_cur_; ++k) {
        factor *= e / static_cast<double>(k);
        H3_TRY(ops::axpby(ctx, 1.0f, out, static_cast<float>(factor), d_cur_[static_cast<size_t>(k)], out));
    }
    return ok_status();
}

size_t TaylorSeer::bytes() const {
    size_t b = 0;
    for (const auto& d : d_prev_) b += held_bytes(d);
    for (const auto& d : d_cur_) b += held_bytes(d);
    return b;
}

} // namespace h3::cache
