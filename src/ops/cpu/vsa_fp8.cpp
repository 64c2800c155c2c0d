// CPU reference of block_sparse_attention's fp8 mode (ops/vsa.h): the CUDA kernel's quantization simulated in
// fp32/double — e4m3 q per (head, query tile) and k, v per head with power-of-two scales (ops/fp8_scale.h),
// scores per 64-key tile in list order against the running row max, P = 2^(x − m + 8) rounded to e4m3, fp32
// row sums of the unrounded P, P·V summed in double (the kernel's fp32 tensor-core sums differ from it only
// by their rounding). A cancelled job (ops/cancel.h) skips the query tiles not yet started.
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

// x [S, H, D] -> e4m3 values (unscaled) [H, S, D] with one scale per head over all rows.
std::vector<float> quantize_per_head(const Tensor& x, std::vector<float>& scales) {
    const int64_t s = x.dim(0), h = x.dim(1), d = x.dim(2);
    std::vector<float> f(static_cast<size_t>(s * h * d));
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < s; ++i)
        for (int64_t hh = 0; hh < h; ++hh)
            load_f32(elem_ptr(x, (i * h + hh) * d), x.dtype(), f.data() + (hh * s + i) * d, d);
    scales.assign(static_cast<size_t>(h), 1.0f);
#pragma omp parallel for schedule(static)
    for (int64_t hh = 0; hh < h; ++hh) {
        float* p = f.data() + hh * s * d;
        float amax = 0.0f;
        for (int64_t e = 0; e < s * d; ++e) amax = std::max(amax, std::fabs(p[e]));
        const float sc = fp8_block_scale(amax), inv = 1.0f / sc;
        scales[static_cast<size_t>(hh)] = sc;
        for (int64_t e = 0; e < s * d; ++e) p[e] = e4m3_round(p[e] * inv);
    }
    return f;
}

} // namespace

Status block_sparse_attention_fp8(const Context&, const BlockSparseAttentionParams& p, const VsaTiles& tiles,
                                  const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lists,
                                  Tensor& o) {
    const int64_t S = q.dim(0), heads = q.dim(1), d = q.dim(2), n = tiles.num_tiles(),
                  P = tiles.num_prefix_tiles, width = lists.dim(2);
    constexpr int64_t kT = kVsaTileRows;
    const int32_t* slots = tiles.slot_rows.data_as<const int32_t>();
    const int32_t* sizes = tiles.tile_sizes.data_as<const int32_t>();
    const int32_t* lp = lists.data_as<const int32_t>();
    std::vector<float> k_scale, v_scale;
    const std::vector<float> k8 = quantize_per_head(k, k_scale), v8 = quantize_per_head(v, v_scale);
    const float scale_log2 = p.scale * 1.4426950408889634f;
    const float bias = static_cast<float>(kFp8AttnPBias), unbias = std::exp2(-bias);
    const std::atomic<bool>* cancel = cancel_flag();
#pragma omp parallel
    {
        std::vector<float> q8(static_cast<size_t>(kT * d)), x(kT);
        std::vector<double> acc(static_cast<size_t>(d));
        std::vector<float> out(static_cast<size_t>(d));
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t t = 0; t < n; ++t)
            for (int64_t h = 0; h < heads; ++h) {
                if (cancel_requested(cancel)) continue;
                // q: this tile's valid slots, one scale
                float amax = 0.0f;
                for (int64_t s = 0; s < kT; ++s) {
                    const int32_t i = slots[t * kT + s];
                    if (i < 0) continue;
                    load_f32(elem_ptr(q, (i * heads + h) * d), q.dtype(), q8.data() + s * d, d);
                    for (int64_t c = 0; c < d; ++c) amax = std::max(amax, std::fabs(q8[s * d + c]));
                }
                const float qs = fp8_block_scale(amax), qinv = 1.0f / qs;
                const float sl2 = qs * k_scale[static_cast<size_t>(h)] * scale_log2;
                const int64_t count = t < P ? n : width;
                const int32_t* l = t < P ? nullptr : lp + (h * tiles.num_video_tiles + (t - P)) * width;
                const float* kh = k8.data() + h * S * d;
                const float* vh = v8.data() + h * S * d;
                for (int64_t s = 0; s < kT; ++s) {
                    const int32_t i = slots[t * kT + s];
                    if (i < 0) continue;
                    float* qi = q8.data() + s * d;
                    for (int64_t c = 0; c < d; ++c) qi[c] = e4m3_round(qi[c] * qinv);
                    float m = -std::numeric_limits<float>::infinity(), lsum = 0.0f;
                    std::fill(acc.begin(), acc.end(), 0.0);
                    for (int64_t w = 0; w < count; ++w) {
                        const int64_t kt = l ? l[w] : w;
                        const int64_t valid = sizes[kt];
                        float bmax = -std::numeric_limits<float>::infinity();
                        for (int64_t c = 0; c < valid; ++c) {
                            const float* kc = kh + static_cast<int64_t>(slots[kt * kT + c]) * d;
                            double dot = 0.0;
                            for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(qi[e]) * kc[e];
                            x[static_cast<size_t>(c)] = static_cast<float>(dot);
                            bmax = std::max(bmax, x[static_cast<size_t>(c)]);
                        }
                        const float mx = std::max(m, bmax * sl2);
                        const float corr = std::exp2(m - mx); // m = −inf on the first tile: 0
                        float sum = 0.0f;
                        for (double& a : acc) a *= corr;
                        for (int64_t c = 0; c < valid; ++c) {
                            const float pf =
                                std::exp2(std::fma(x[static_cast<size_t>(c)], sl2, -(mx - bias)));
                            sum += pf;
                            const double p8 = e4m3_round(pf);
                            const float* vc = vh + static_cast<int64_t>(slots[kt * kT + c]) * d;
                            for (int64_t e = 0; e < d; ++e) acc[static_cast<size_t>(e)] += p8 * vc[e];
                        }
                        lsum = lsum * corr + sum * unbias;
                        m = mx;
                    }
                    const double os = v_scale[static_cast<size_t>(h)] * static_cast<double>(unbias) / lsum;
                    for (int64_t e = 0; e < d; ++e)
                        out[static_cast<size_t>(e)] = static_cast<float>(acc[e] * os);
                    store_f32(out.data(), elem_ptr_mut(o, (i * heads + h) * d), o.dtype(), d);
                }
            }
    }
    return cancel_requested(cancel) ? cancelled_in("block_sparse_attention") : ok_status();
}

} // namespace h3::ops::cpu_impl
