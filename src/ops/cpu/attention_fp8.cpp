// CPU reference of attention's fp8 mode (ops/attention.h): the CUDA kernel's quantization simulated in
// fp32/double — e4m3 q/k/v with the same per-block power-of-two scales, scores per 128-key block against the
// running row max, P rounded to e4m3 with the v block scales folded in, fp32 row sums of the unrounded P,
// P·V summed in double (the kernel's fp32 tensor-core sums differ from it only by their rounding).
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
    std::vector<float> scales; // [H, ceil(S/128)]
    int64_t blocks = 0;
};

// x [S, H, D] bf16 -> per head, blocks of 128 rows, each with fp8_block_scale of its max |x|.
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
                     const Tensor& v, Tensor& o) {
    const int64_t sq = q.dim(0), sk = k.dim(0), heads = q.dim(1), kvh = k.dim(1), d = q.dim(2);
    const int64_t group = heads / kvh, bm = kFp8AttnBlockM, bn = kFp8AttnBlockN;
    const Quantized q8 = quantize(q, bm), k8 = quantize(k, bn), v8 = quantize(v, bn);
    std::vector<int> vmax_log2(static_cast<size_t>(kvh), -127);
    for (int64_t h = 0; h < kvh; ++h)
        for (int64_t b = 0; b < v8.blocks; ++b)
            vmax_log2[static_cast<size_t>(h)] =
                std::max(vmax_log2[static_cast<size_t>(h)],
                         fp8_scale_log2(v8.scales[static_cast<size_t>(h * v8.blocks + b)]));
    const float scale_log2 = p.scale * 1.4426950408889634f;
#pragma omp parallel
    {
        std::vector<double> acc(static_cast<size_t>(d));
        std::vector<float> x(static_cast<size_t>(bn)), out(static_cast<size_t>(d));
#pragma omp for collapse(2) schedule(static)
        for (int64_t i = 0; i < sq; ++i)
            for (int64_t h = 0; h < heads; ++h) {
                const int64_t hk = h / group;
                const float* qi = q8.values.data() + (h * sq + i) * d;
                const float qs = q8.scales[static_cast<size_t>(h * q8.blocks + i / bm)] * scale_log2;
                const int vmax = vmax_log2[static_cast<size_t>(hk)];
                const int64_t nk = p.causal ? std::min(sk, i + 1) : sk;
                float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t j0 = 0; j0 < nk; j0 += bn) {
                    const int64_t jb = j0 / bn, n = std::min(bn, nk - j0);
                    const float sl2 = qs * k8.scales[static_cast<size_t>(hk * k8.blocks + jb)];
                    const int ve =
                        8 + fp8_scale_log2(v8.scales[static_cast<size_t>(hk * v8.blocks + jb)]) - vmax;
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
                        const float pf = std::exp2(
                            std::fma(x[static_cast<size_t>(c)], sl2, -(mx - static_cast<float>(ve))));
                        sum += pf;
                        const double p8 = e4m3_round(pf);
                        const float* vc = v8.values.data() + (hk * sk + j0 + c) * d;
                        for (int64_t e = 0; e < d; ++e) acc[static_cast<size_t>(e)] += p8 * vc[e];
                    }
                    l = l * corr + sum * std::exp2(static_cast<float>(-ve));
                    m = mx;
                }
                const double out_scale = std::ldexp(1.0, vmax - 8) / l;
                for (int64_t e = 0; e < d; ++e)
                    out[static_cast<size_t>(e)] = static_cast<float>(acc[e] * out_scale);
                store_f32(out.data(), elem_ptr_mut(o, (i * heads + h) * d), o.dtype(), d);
            }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
