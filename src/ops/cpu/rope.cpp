// CPU RoPE reference (rotate-half, in place): fp32 math, one rounding at the store.
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <vector>

namespace h3::ops::cpu_impl {

namespace {
float rnd(float v, DType t) {
    return t == DType::kBF16 ? round_bf16(v) : (t == DType::kF16 ? round_f16(v) : v);
}
} // namespace

Status rope(const Context&, const RopeParams& p, Tensor& x, const Tensor& cos, const Tensor& sin) {
    const int64_t s = x.dim(0), heads = x.dim(1), dh = x.dim(2), rd = p.rotary_dim, half = rd / 2;
#pragma omp parallel
    {
        std::vector<float> cs(static_cast<size_t>(rd)), sn(static_cast<size_t>(rd)),
            v(static_cast<size_t>(rd));
        std::vector<float> out(static_cast<size_t>(rd));
#pragma omp for schedule(static)
        for (int64_t i = 0; i < s; ++i) {
            load_f32(elem_ptr(cos, i * rd), cos.dtype(), cs.data(), rd);
            load_f32(elem_ptr(sin, i * rd), sin.dtype(), sn.data(), rd);
            if (p.round_tables) {
                round_row(cs.data(), x.dtype(), rd);
                round_row(sn.data(), x.dtype(), rd);
            }
            for (int64_t h = 0; h < heads; ++h) {
                void* head = elem_ptr_mut(x, (i * heads + h) * dh);
                load_f32(head, x.dtype(), v.data(), rd);
                if (p.round_tables) {
                    // bf16 emulation: eager PyTorch rounds x·cos and rotate_half(x)·sin before the sum.
                    const DType t = x.dtype();
                    for (int64_t c = 0; c < half; ++c) {
                        const float a = v[c], b = v[c + half];
                        out[c] = rnd(rnd(a * cs[c], t) - rnd(b * sn[c], t), t);
                        out[c + half] = rnd(rnd(b * cs[c + half], t) + rnd(a * sn[c + half], t), t);
                    }
                } else {
                    for (int64_t c = 0; c < half; ++c) {
                        const float a = v[c], b = v[c + half];
                        out[c] = a * cs[c] - b * sn[c];
                        out[c + half] = b * cs[c + half] + a * sn[c + half];
                    }
                }
                store_f32(out.data(), head, x.dtype(), rd);
            }
        }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
