// CPU reference of the fp8 GEMM (ops/gemm_fp8.h): rows rounded to e4m3 with their power-of-two scales (the
// same bytes as the CUDA quantizer), products summed in double, scaled, bias added, one rounding into y.
#include "ops/cancel.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/fp8_scale.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace h3::ops::cpu_impl {

Status quantize_rows_fp8(const Context&, const Tensor& x, Tensor& x8, Tensor& scale) {
    const int64_t rows = x.dim(0), cols = x.dim(1);
    uint8_t* dst = x8.data_as<uint8_t>();
    float* sc = scale.data_as<float>();
#pragma omp parallel
    {
        std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            load_f32(elem_ptr(x, r * cols), x.dtype(), row.data(), cols);
            float amax = 0.0f;
            for (float v : row) amax = std::max(amax, std::fabs(v));
            const float s = fp8_block_scale(amax), inv = 1.0f / s;
            sc[r] = s;
            for (int64_t c = 0; c < cols; ++c)
                dst[r * cols + c] = f32_to_f8e4m3(row[static_cast<size_t>(c)] * inv);
        }
    }
    return ok_status();
}

Status gemm_fp8(const Context& ctx, const Fp8GemmParams& p, const Tensor& x, const Fp8Weight& w,
                const Tensor& bias, Tensor& y) {
    const int64_t m = x.dim(0), k = x.dim(1);
    Tensor x8 = Tensor::host(Shape{m, k}, DType::kF8E4M3), xs = Tensor::host(Shape{m}, DType::kF32);
    H3_TRY(quantize_rows_fp8(ctx, x, x8, xs));
    return gemm_fp8_quantized(ctx, p, x8, xs, w, bias, y);
}

Status gemm_fp8_quantized(const Context&, const Fp8GemmParams&, const Tensor& x8, const Tensor& xs,
                          const Fp8Weight& w, const Tensor& bias, Tensor& y) {
    const int64_t m = x8.dim(0), k = x8.dim(1), n = w.data.dim(0);
    // e4m3 bytes -> floats once (256-entry table)
    float lut[256];
    for (int i = 0; i < 256; ++i) lut[i] = f8e4m3_to_f32(static_cast<uint8_t>(i));
    std::vector<float> wf(static_cast<size_t>(n * k)), xf(static_cast<size_t>(m * k));
    const uint8_t* wb = w.data.data_as<const uint8_t>();
    const uint8_t* xb = x8.data_as<const uint8_t>();
    for (int64_t i = 0; i < n * k; ++i) wf[static_cast<size_t>(i)] = lut[wb[i]];
    for (int64_t i = 0; i < m * k; ++i) xf[static_cast<size_t>(i)] = lut[xb[i]];
    const float* ws = w.scale.data_as<const float>();
    const float* xsc = xs.data_as<const float>();
    std::vector<float> bf(static_cast<size_t>(n), 0.0f);
    if (bias.defined()) load_f32(bias.data(), bias.dtype(), bf.data(), n);
    const std::atomic<bool>* cancel = cancel_flag();
#pragma omp parallel
    {
        std::vector<float> out(static_cast<size_t>(n));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < m; ++r) {
            if (cancel_requested(cancel)) continue; // a row is n·k multiply-adds
            const float* xr = xf.data() + r * k;
            for (int64_t c = 0; c < n; ++c) {
                const float* wr = wf.data() + c * k;
                double acc = 0.0;
                for (int64_t e = 0; e < k; ++e) acc += static_cast<double>(xr[e]) * wr[e];
                out[static_cast<size_t>(c)] =
                    static_cast<float>(acc * xsc[r] * ws[c]) + bf[static_cast<size_t>(c)];
            }
            store_f32(out.data(), elem_ptr_mut(y, r * n), y.dtype(), n);
        }
    }
    return cancel_requested(cancel) ? cancelled_in("gemm_fp8") : ok_status();
}

} // namespace h3::ops::cpu_impl
