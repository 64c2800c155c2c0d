// CPU AdaLN references: modulate and gated residual with strided table rows. fp32 math; the optional
// intermediate rounding emulates the bf16 arithmetic of the PyTorch reference.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <vector>

namespace h3::ops::cpu_impl {

Status modulate(const Context&, const ModulateParams& p, const Tensor& x, const Tensor& shift,
                const Tensor& scale, const Tensor& row, Tensor& y) {
    const int64_t s = x.dim(0), d = x.dim(1);
    const int64_t shift_pitch = shift.stride(0), scale_pitch = scale.stride(0);
#pragma omp parallel
    {
        std::vector<float> v(static_cast<size_t>(d)), sh(static_cast<size_t>(d)), sc(static_cast<size_t>(d));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < s; ++r) {
            const int64_t t = load_index(row, r);
            load_f32(elem_ptr(x, r * d), x.dtype(), v.data(), d);
            load_f32(elem_ptr(shift, t * shift_pitch), shift.dtype(), sh.data(), d);
            load_f32(elem_ptr(scale, t * scale_pitch), scale.dtype(), sc.data(), d);
            for (int64_t c = 0; c < d; ++c) sc[c] += 1.0f;
            if (p.round_intermediate) round_row(sc.data(), y.dtype(), d); // eager bf16 rounds (1 + scale)
            for (int64_t c = 0; c < d; ++c) v[c] *= sc[c];
            if (p.round_intermediate) round_row(v.data(), y.dtype(), d);
            for (int64_t c = 0; c < d; ++c) v[c] += sh[c];
            store_f32(v.data(), elem_ptr_mut(y, r * d), y.dtype(), d);
        }
    }
    return ok_status();
}

Status gated_residual(const Context&, const GatedResidualParams& p, Tensor& h, const Tensor& gate,
                      const Tensor& y, const Tensor& row) {
    const int64_t s = h.dim(0), d = h.dim(1), pitch = gate.stride(0);
#pragma omp parallel
    {
        std::vector<float> hv(static_cast<size_t>(d)), g(static_cast<size_t>(d)), yv(static_cast<size_t>(d));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < s; ++r) {
            const int64_t t = load_index(row, r);
            load_f32(elem_ptr(h, r * d), h.dtype(), hv.data(), d);
            load_f32(elem_ptr(gate, t * pitch), gate.dtype(), g.data(), d);
            load_f32(elem_ptr(y, r * d), y.dtype(), yv.data(), d);
            for (int64_t c = 0; c < d; ++c) g[c] *= yv[c];
            if (p.round_intermediate) round_row(g.data(), h.dtype(), d);
            for (int64_t c = 0; c < d; ++c) hv[c] += g[c];
            store_f32(hv.data(), elem_ptr_mut(h, r * d), h.dtype(), d);
        }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
