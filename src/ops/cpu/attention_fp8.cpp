// CPU reference of attention's fp8 mode (ops/attention.h): the CUDA kernel's quantization simulated in
// fp32/double — e4m3 q (per 128-row block) and k, v (per head) with the same power-of-two scales, scores per
// key block against the running row max, P = 2^(x − m + 8) rounded to e4m3, fp32 row sums of the unrounded
// P, P·V summed in double (the kernel's fp32 tensor-core sums differ from it only by their rounding). A
// cancelled job (ops/cancel.h) skips the query rows not yet started.
#include "ops/cancel.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/fp8_scale.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace h3::ops::cpu_impl {

namespace {

struct Quantized {
    std::vector<float> values; // [H, S, D] e4m3 values (unscaled), head-major
    std::vector<float> scales; // [H, ceil(S/block)]
    int64_t blocks = 0;
};

// x [S, H, D] bf16 -> per head, blocks of `block` rows, each with fp8_block_scale of its max |x|.
Quantized quantize(const Tensor& x, int64_t block) {
    const int64_t s = x.dim(0), h = x.dim(1), d = x.dim(2);
    Quantized out;
    out.blocks = (s + block - 1) / block;
    out.values.assign(static_cast<size_t>(h * s * d), 0.0f);
    out.scales.assign(static_cast<size_t>(h * out.blocks), 1.0f);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t b = 0; b < out.blocks; ++b) {
            const int64_t r0 = b * block, r1 = std::min(s, r0 + block);
            std::vector<float> row(static_cast<size_t>(d));
            float amax = 0.0f;
            for (int64_t r = r0; r < r1; ++r) {
                load_f32(elem_ptr(x, (r * h + hh) * d), x.dtype(), row.data(), d);
                for (float v : row) amax = std::max(amax, std::fabs(v));
            }
            const float sc = fp8_block_scale(amax), inv = 1.0f / sc;
            out.scales[static_cast<size_t>(hh * out.blocks + b)] = sc;
            for (int64_t r = r0; r < r1; ++r) {
                load_f32(elem_ptr(x, (r * h + hh) * d), x.dtype(), row.data(), d);
                float* dst = out.values.data() + (hh * s + r) * d;
                for (int64_t c = 0; c < d; ++c) dst[c] = e4m3_round(row[static_cast<size_t>(c)] * inv);
            }
        }
    return out;
}

} // namespace

Status attention_fp8(const Context&, const AttentionParams& p, const Tensor& q, const Tensor& k,
                     const Tensor& v, Tensor& o, int64_t key_block) {
    const int64_t sq = q.dim(0), sk = k.dim(0), heads = q.dim(1), kvh = k.dim(1), d = q.dim(2);
    if (key_block <= 0 || key_block % 32)
        return invalid_argument("attention_fp8: key_block must be a positive multiple of 32, not " +
                                std::to_string(key_block));
    const int64_t group = heads / kvh, bm = kFp8AttnBlockM, bn = key_block;
    // k and v: one block (one scale) per head
    const int64_t all = std::max<int64_t>(sk, 1);
    const Quantized q8 = quantize(q, bm), k8 = quantize(k, all), v8 = quantize(v, all);
    const float scale_log2 = p.scale * 1.4426950408889634f;
    const float bias = static_cast<float>(kFp8AttnPBias), unbias = std::exp2(-bias);
    const std::atomic<bool>* cancel = cancel_flag();
#pragma omp parallel
    {
        std::vector<double> acc(static_cast<size_t>(d));
        std::vector<float> x(static_cast<size_t>(bn)), out(static_cast<size_t>(d));
#pragma omp for collapse(2) schedule(static)
        for (int64_t i = 0; i < sq; ++i)
            for (int64_t h = 0; h < heads; ++h) {
                if (cancel_requested(cancel)) continue;
                const int64_t hk = h / group;
                const float* qi = q8.values.data() + (h * sq + i) * d;
                const float sl2 = q8.scales[static_cast<size_t>(h * q8.blocks + i / bm)] *
                                  k8.scales[static_cast<size_t>(hk)] * scale_log2;
                const int64_t nk = p.causal ? std::min(sk, i + 1) : sk;
                float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t j0 = 0; j0 < nk; j0 += bn) {
                    const int64_t n = std::min(bn, nk - j0);
                    float bmax = -std::numeric_limits<float>::infinity();
                    for (int64_t c = 0; c < n; ++c) {
                        const float* kc = k8.values.data() + (hk * sk + j0 + c) * d;
                        double dot = 0.0;
                        for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(qi[e]) * kc[e];
                        x[static_cast<size_t>(c)] = static_cast<float>(dot);
                        bmax = std::max(bmax, x[static_cast<size_t>(c)]);
                    }
                    const float mx = std::max(m, bmax * sl2);
                    const float corr = std::exp2(m - mx); // m = -inf on the first block: 0
                    float sum = 0.0f;
                    for (double& a : acc) a *= corr;
                    for (int64_t c = 0; c < n; ++c) {
                        const float pf = std::exp2(std::fma(x[static_cast<size_t>(c)], sl2, -(mx - bias)));
                        sum += pf;
                        const double p8 = e4m3_round(pf);
                        const float* vc = v8.values.data() + (hk * sk + j0 + c) * d;
                        for (int64_t e = 0; e < d; ++e) acc[static_cast<size_t>(e)] += p8 * vc[e];
                    }
                    l = l * corr + sum * unbias;
                    m = mx;
                }
                const double out_scale = v8.scales[static_cast<size_t>(hk)] * static_cast<double>(unbias) / l;
                for (int64_t e = 0; e < d; ++e)
                    out[static_cast<size_t>(e)] = static_cast<float>(acc[e] * out_scale);
                store_f32(out.data(), elem_ptr_mut(o, (i * heads + h) * d), o.dtype(), d);
            }
    }
    return cancel_requested(cancel) ? cancelled_in("attention") : ok_status();
}

} // namespace h3::ops::cpu_impl
