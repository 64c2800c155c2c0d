// CPU reference of sample_to_rgb8 (ops/frames.h): the per-value expression in fp32, frames in parallel.
// Built with -ffp-contract=off (src/ops/CMakeLists.txt): the product and the sum round separately, as the
// CUDA kernel's __fmul_rn / __fadd_rn do. A cancelled job (ops/cancel.h) skips the frames not yet started.
#include "ops/cancel.h"
#include "ops/cpu/cpu_ops.h"

#include <cmath>

namespace h3::ops::cpu_impl {

Status sample_to_rgb8(const Context&, const SampleToRgb8Params& p, const Tensor& sample, Tensor& frames) {
    const int64_t f = sample.dim(1), hw = sample.dim(2) * sample.dim(3), plane_stride = sample.stride(0);
    const float* s = sample.data_as<const float>();
    uint8_t* d = frames.data_as<uint8_t>();
    const std::atomic<bool>* cancel = cancel_flag();
#pragma omp parallel for schedule(static) if (f * hw > (1 << 16))
    for (int64_t fi = 0; fi < f; ++fi) {
        if (cancel_requested(cancel)) continue;
        for (int64_t ch = 0; ch < 3; ++ch) {
            const float sd = p.stddev[static_cast<size_t>(ch)], mn = p.mean[static_cast<size_t>(ch)];
            const float* plane = s + ch * plane_stride + fi * hw;
            uint8_t* out = d + fi * hw * 3 + ch;
            for (int64_t i = 0; i < hw; ++i) {
                float v = plane[i] * sd + mn;
                v = 0.0f < v ? v : 0.0f; // std::max(0, v): NaN -> 0
                v = v < 1.0f ? v : 1.0f; // std::min(1, v)
                // numpy's (x * 255).round(): half to even (nearbyint in the default rounding mode).
                out[i * 3] = static_cast<uint8_t>(std::nearbyint(v * 255.0f));
            }
        }
    }
    return cancel_requested(cancel) ? cancelled_in("sample_to_rgb8") : ok_status();
}

} // namespace h3::ops::cpu_impl
