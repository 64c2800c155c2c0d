// CPU attention reference: exact softmax(q·kᵀ·scale)·v with an online (running max) softmax per query row,
// so memory stays O(S·D). GQA: query head h reads kv head h / (H/Hkv); causal: keys 0..i for query i.
// K and V are widened to fp32 once, head-major, so each head's keys are contiguous. lse = m + ln l of the
// row's running max and sum (double), rounded once to f32. A cancelled job (ops/cancel.h) skips the rows
// not yet started: the flag is read once per query row and head (one row is sk·d multiply-adds).
#include "ops/cancel.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace h3::ops::cpu_impl {

namespace {

// [S,H,D] of any float dtype -> f32 [H,S,D].
std::vector<float> head_major_f32(const Tensor& t) {
    const int64_t s = t.dim(0), h = t.dim(1), d = t.dim(2);
    std::vector<float> out(static_cast<size_t>(s * h * d));
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < s; ++i)
        for (int64_t hh = 0; hh < h; ++hh)
            load_f32(elem_ptr(t, (i * h + hh) * d), t.dtype(), out.data() + (hh * s + i) * d, d);
    return out;
}

} // namespace

Status attention(const Context&, const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                 Tensor& o) {
    if (p.fp8) return attention_fp8(Context::cpu(), p, q, k, v, o);
    const int64_t sq = q.dim(0), sk = k.dim(0), heads = q.dim(1), d = q.dim(2);
    const int64_t group = heads / k.dim(1); // query heads per kv head
    const std::vector<float> kf = head_major_f32(k);
    const std::vector<float> vf = head_major_f32(v);
    float* lse = p.lse ? p.lse->data_as<float>() : nullptr;
    const std::atomic<bool>* cancel = cancel_flag();
#pragma omp parallel
    {
        std::vector<float> qv(static_cast<size_t>(d));
        std::vector<double> acc(static_cast<size_t>(d));
        std::vector<float> out(static_cast<size_t>(d));
#pragma omp for collapse(2) schedule(static)
        for (int64_t i = 0; i < sq; ++i) {
            for (int64_t h = 0; h < heads; ++h) {
                if (cancel_requested(cancel)) continue;
                load_f32(elem_ptr(q, (i * heads + h) * d), q.dtype(), qv.data(), d);
                const float* kh = kf.data() + (h / group) * sk * d;
                const float* vh = vf.data() + (h / group) * sk * d;
                const int64_t nk = p.causal ? std::min(sk, i + 1) : sk;
                double m = -std::numeric_limits<double>::infinity(), l = 0.0;
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t j = 0; j < nk; ++j) {
                    const float* kj = kh + j * d;
                    float dot = 0.0f;
                    for (int64_t c = 0; c < d; ++c) dot += qv[c] * kj[c];
                    const double sc = static_cast<double>(dot) * p.scale;
                    if (sc > m) {
                        // New running max: rescale what has been accumulated so far.
                        const double corr = std::exp(m - sc);
                        l *= corr;
                        for (int64_t c = 0; c < d; ++c) acc[c] *= corr;
                        m = sc;
                    }
                    const double e = std::exp(sc - m);
                    l += e;
                    const float* vj = vh + j * d;
                    for (int64_t c = 0; c < d; ++c) acc[c] += e * vj[c];
                }
                for (int64_t c = 0; c < d; ++c) out[c] = static_cast<float>(acc[c] / l);
                store_f32(out.data(), elem_ptr_mut(o, (i * heads + h) * d), o.dtype(), d);
                if (lse) lse[i * heads + h] = static_cast<float>(m + std::log(l));
            }
        }
    }
    return cancel_requested(cancel) ? cancelled_in("attention") : ok_status();
}

} // namespace h3::ops::cpu_impl
