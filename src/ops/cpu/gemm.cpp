// CPU GEMM reference through OpenBLAS sgemm. bf16/f16 operands are widened to f32 in blocks so that the
// scratch stays bounded for checkpoint-sized weights; bias, alpha and accumulation are applied in fp32 and
// y is rounded once. Each sgemm call is bounded to about kCancelCheckMacs multiply-adds (rows of x per
// block), and a cancelled job (ops/cancel.h) stops between blocks.
#include "ops/cancel.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

namespace h3::ops::cpu_impl {

namespace {

// Scratch budget per widened operand block (elements): 16 Mi floats = 64 MiB.
constexpr int64_t kBlockElems = int64_t{16} << 20;

// A [rows, k] f32 view of rows [r0, r0+nr) of a contiguous [*, k] tensor: direct for f32, widened otherwise.
const float* rows_f32(const Tensor& t, int64_t r0, int64_t nr, int64_t k, std::vector<float>& scratch) {
    const void* src = elem_ptr(t, r0 * k);
    if (t.dtype() == DType::kF32) return static_cast<const float*>(src);
    scratch.resize(static_cast<size_t>(nr * k));
    const size_t esz = dtype_size(t.dtype());
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nr; ++r)
        load_f32(static_cast<const uint8_t*>(src) + r * k * static_cast<int64_t>(esz), t.dtype(),
                 scratch.data() + r * k, k);
    return scratch.data();
}

} // namespace

Status gemm(const Context&, const GemmParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
            Tensor& y) {
    const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
    if (m == 0 || n == 0) return ok_status();

    std::vector<float> bias_f(static_cast<size_t>(n), 0.0f);
    if (bias.defined()) load_f32(bias.data(), bias.dtype(), bias_f.data(), n);

    const int64_t kk = std::max<int64_t>(k, 1);
    int64_t nb = std::clamp<int64_t>(kBlockElems / kk, 1, n);
    int64_t mb = std::clamp<int64_t>(kBlockElems / kk, 1, m);
    if (mb * nb > kCancelCheckMacs / kk) { // one call ≤ ~kCancelCheckMacs, both sides ≥ 256 where possible
        nb = std::clamp<int64_t>(kCancelCheckMacs / (kk * std::min<int64_t>(mb, 256)), 1, nb);
        mb = std::clamp<int64_t>(kCancelCheckMacs / (kk * nb), 1, mb);
    }
    const std::atomic<bool>* cancel = cancel_flag();
    std::vector<float> w_scratch, x_scratch, c;
    // When x fits one block it is widened once, outside the W loop.
    const float* x_all = (mb == m) ? rows_f32(x, 0, m, k, x_scratch) : nullptr;

    for (int64_t n0 = 0; n0 < n; n0 += nb) {
        const int64_t nn = std::min(nb, n - n0);
        const float* wb = rows_f32(w, n0, nn, k, w_scratch);
        for (int64_t m0 = 0; m0 < m; m0 += mb) {
            if (cancel_requested(cancel)) return cancelled_in("gemm");
            const int64_t mm = std::min(mb, m - m0);
            const float* xb = x_all ? x_all + m0 * k : rows_f32(x, m0, mm, k, x_scratch);
            c.assign(static_cast<size_t>(mm * nn), 0.0f);
            if (k > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(mm),
                            static_cast<int>(nn), static_cast<int>(k), p.alpha, xb, static_cast<int>(k), wb,
                            static_cast<int>(k), 0.0f, c.data(), static_cast<int>(nn));
#pragma omp parallel
            {
                std::vector<float> old(static_cast<size_t>(nn));
#pragma omp for schedule(static)
                for (int64_t r = 0; r < mm; ++r) {
                    float* cr = c.data() + r * nn;
                    void* yr = elem_ptr_mut(y, (m0 + r) * n + n0);
                    for (int64_t j = 0; j < nn; ++j) cr[j] += bias_f[static_cast<size_t>(n0 + j)];
                    if (p.accumulate) {
                        load_f32(yr, y.dtype(), old.data(), nn);
                        for (int64_t j = 0; j < nn; ++j) cr[j] += old[static_cast<size_t>(j)];
                    }
                    store_f32(cr, yr, y.dtype(), nn);
                }
            }
        }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
