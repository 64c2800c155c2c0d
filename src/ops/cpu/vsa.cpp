// CPU references of the VSA ops (ops/vsa.h). Pooling and tile scores sum in fp32 in a fixed order (slot
// order; channel order with one fused multiply-add per product, std::fma) so the CUDA kernels can reproduce
// them bit for bit; the block-sparse attention is the
// dense reference (ops/cpu/attention.cpp) with the keys outside a query's tiles skipped: it walks the kept
// keys in packed row order with the same online softmax, so a full selection reproduces dense attention. The
// fp8 mode's simulation is cpu/vsa_fp8.cpp. A cancelled job (ops/cancel.h) skips the query tiles of the
// block-sparse attention not yet started.
#include "ops/cancel.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

namespace h3::ops::cpu_impl {

namespace {

// [S,H,D] of any float dtype -> f32 [H,S,D] (each head's rows contiguous).
std::vector<float> head_major(const Tensor& t) {
    const int64_t s = t.dim(0), h = t.dim(1), d = t.dim(2);
    std::vector<float> out(static_cast<size_t>(s * h * d));
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < s; ++i)
        for (int64_t hh = 0; hh < h; ++hh)
            load_f32(elem_ptr(t, (i * h + hh) * d), t.dtype(), out.data() + (hh * s + i) * d, d);
    return out;
}

// A score as the selection ranks it: NaN ranks as −inf.
float rank_value(float s) {
    return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s;
}

} // namespace

Status vsa_pool(const Context&, const VsaTiles& tiles, const Tensor& x, Tensor& out) {
    const int64_t H = x.dim(1), D = x.dim(2), n = tiles.num_tiles();
    const int32_t* slots = tiles.slot_rows.data_as<const int32_t>();
    const int32_t* sizes = tiles.tile_sizes.data_as<const int32_t>();
    float* o = out.data_as<float>();
#pragma omp parallel
    {
        std::vector<float> row(static_cast<size_t>(D)), sum(static_cast<size_t>(D));
#pragma omp for schedule(static)
        for (int64_t t = 0; t < n; ++t)
            for (int64_t h = 0; h < H; ++h) {
                std::fill(sum.begin(), sum.end(), 0.0f);
                for (int s = 0; s < kVsaTileRows; ++s) {
                    const int32_t r = slots[t * kVsaTileRows + s];
                    if (r < 0) continue;
                    load_f32(elem_ptr(x, (r * H + h) * D), x.dtype(), row.data(), D);
                    for (int64_t c = 0; c < D; ++c)
                        sum[static_cast<size_t>(c)] += row[static_cast<size_t>(c)];
                }
                const float size = static_cast<float>(sizes[t]);
                for (int64_t c = 0; c < D; ++c) o[(h * n + t) * D + c] = sum[static_cast<size_t>(c)] / size;
            }
    }
    return ok_status();
}

Status vsa_pool_qkv(const Context& ctx, const VsaTiles& tiles, const Tensor& q, const Tensor& k,
                    const Tensor& v, Tensor& out) {
    const int64_t H = q.dim(1), D = q.dim(2), n = tiles.num_tiles();
    const Tensor* xs[3] = {&q, &k, &v};
    for (int64_t i = 0; i < out.dim(0); ++i) {
        Tensor part = out.slice(0, i, i + 1).view({H, n, D});
        H3_TRY(cpu_impl::vsa_pool(ctx, tiles, *xs[i], part));
    }
    return ok_status();
}

Status vsa_tile_scores(const Context&, const Tensor& q, const Tensor& k, Tensor& scores) {
    const int64_t H = q.dim(0), n = q.dim(1), D = q.dim(2);
    const float div = std::sqrt(static_cast<float>(D));
    const float* qp = q.data_as<const float>();
    const float* kp = k.data_as<const float>();
    float* sp = scores.data_as<float>();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i) {
            const float* qi = qp + (h * n + i) * D;
            for (int64_t j = 0; j < n; ++j) {
                const float* kj = kp + (h * n + j) * D;
                float dot = 0.0f;
                for (int64_t c = 0; c < D; ++c) dot = std::fma(qi[c], kj[c], dot);
                sp[(h * n + i) * n + j] = dot / div;
            }
        }
    return ok_status();
}

Status vsa_select(const Context&, const VsaSelectParams& p, const VsaTiles& tiles, const Tensor& scores,
                  Tensor& lists) {
    const int64_t H = scores.dim(0), n = tiles.num_tiles(), P = tiles.num_prefix_tiles,
                  nv = tiles.num_video_tiles;
    const bool exempt = !p.compete || P == 0;
    const int64_t width = vsa_select_width(p, P, n);
    const int64_t first = exempt ? P : 0;         // candidates first..n-1
    const int64_t take = exempt ? p.keep : width; // how many of them are picked
    const float* sp = scores.data_as<const float>();
    int32_t* lp = lists.data_as<int32_t>();
#pragma omp parallel
    {
        std::vector<int32_t> cand(static_cast<size_t>(n - first));
#pragma omp for collapse(2) schedule(static)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < nv; ++i) {
                const float* row = sp + (h * n + P + i) * n;
                std::iota(cand.begin(), cand.end(), static_cast<int32_t>(first));
                auto better = [&](int32_t a, int32_t b) {
                    const float va = rank_value(row[a]), vb = rank_value(row[b]);
                    return va > vb || (va == vb && a < b);
                };
                std::partial_sort(cand.begin(), cand.begin() + take, cand.end(), better);
                std::sort(cand.begin(), cand.begin() + take);
                int32_t* out = lp + (h * nv + i) * width;
                int64_t w = 0;
                if (exempt)
                    for (int64_t t = 0; t < P; ++t) out[w++] = static_cast<int32_t>(t);
                for (int64_t t = 0; t < take; ++t) out[w++] = cand[static_cast<size_t>(t)];
            }
    }
    return ok_status();
}

Status block_sparse_attention(const Context&, const BlockSparseAttentionParams& p, const VsaTiles& tiles,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lists,
                              Tensor& o) {
    if (p.fp8) return block_sparse_attention_fp8(Context::cpu(), p, tiles, q, k, v, lists, o);
    const int64_t S = q.dim(0), heads = q.dim(1), d = q.dim(2), n = tiles.num_tiles(),
                  P = tiles.num_prefix_tiles, width = lists.dim(2);
    const int32_t* slots = tiles.slot_rows.data_as<const int32_t>();
    const int32_t* row_tile = tiles.row_tiles.data_as<const int32_t>();
    const int32_t* lp = lists.data_as<const int32_t>();
    const std::vector<float> kf = head_major(k);
    const std::vector<float> vf = head_major(v);
    const std::atomic<bool>* cancel = cancel_flag();
#pragma omp parallel
    {
        std::vector<float> qv(static_cast<size_t>(d));
        std::vector<double> acc(static_cast<size_t>(d));
        std::vector<float> out(static_cast<size_t>(d));
        std::vector<char> selected(static_cast<size_t>(n));
        std::vector<int32_t> keys; // the kept key rows, in packed order
        keys.reserve(static_cast<size_t>(S));
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t h = 0; h < heads; ++h) {
                if (cancel_requested(cancel)) continue;
                if (t < P) {
                    std::fill(selected.begin(), selected.end(), 1);
                } else {
                    std::fill(selected.begin(), selected.end(), 0);
                    const int32_t* l = lp + (h * tiles.num_video_tiles + (t - P)) * width;
                    for (int64_t w = 0; w < width; ++w) selected[static_cast<size_t>(l[w])] = 1;
                }
                keys.clear();
                for (int64_t j = 0; j < S; ++j)
                    if (selected[static_cast<size_t>(row_tile[j])]) keys.push_back(static_cast<int32_t>(j));
                const float* kh = kf.data() + h * S * d;
                const float* vh = vf.data() + h * S * d;
                for (int s = 0; s < kVsaTileRows; ++s) {
                    const int64_t i = slots[t * kVsaTileRows + s];
                    if (i < 0) continue;
                    load_f32(elem_ptr(q, (i * heads + h) * d), q.dtype(), qv.data(), d);
                    double m = -std::numeric_limits<double>::infinity(), l = 0.0;
                    std::fill(acc.begin(), acc.end(), 0.0);
                    for (int32_t j : keys) {
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
                }
            }
        }
    }
    return cancel_requested(cancel) ? cancelled_in("block_sparse_attention") : ok_status();
}

Status vsa_compress_tiles(const Context&, const Tensor& scores, const Tensor& vp, Tensor& oc) {
    const int64_t H = scores.dim(0), n = scores.dim(1), D = vp.dim(2);
    const float* sp = scores.data_as<const float>();
    const float* v = vp.data_as<const float>();
    float* out = oc.data_as<float>();
#pragma omp parallel
    {
        std::vector<float> prob(static_cast<size_t>(n)), acc(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(static)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < n; ++i) {
                const float* row = sp + (h * n + i) * n;
                float m = -std::numeric_limits<float>::infinity();
                for (int64_t j = 0; j < n; ++j) m = std::max(m, row[j]);
                float sum = 0.0f;
                for (int64_t j = 0; j < n; ++j) {
                    prob[static_cast<size_t>(j)] = std::exp(row[j] - m);
                    sum += prob[static_cast<size_t>(j)];
                }
                for (int64_t j = 0; j < n; ++j) prob[static_cast<size_t>(j)] /= sum;
                std::fill(acc.begin(), acc.end(), 0.0f);
                for (int64_t j = 0; j < n; ++j) {
                    const float* vj = v + (h * n + j) * D;
                    const float pj = prob[static_cast<size_t>(j)];
                    for (int64_t c = 0; c < D; ++c) acc[static_cast<size_t>(c)] += pj * vj[c];
                }
                std::copy(acc.begin(), acc.end(), out + (h * n + i) * D);
            }
    }
    return ok_status();
}

// Literally the composition: the gate add on a copy of o, then the row quantization.
Status vsa_gate_add_fp8(const Context& ctx, const VsaGateAddParams& p, const VsaTiles& tiles,
                        const Tensor& oc, const Tensor& gate, const Tensor& o, Fp8Activation& out) {
    H3_ASSIGN_OR_RETURN(Tensor y, Tensor::empty(o.shape(), o.dtype()));
    std::memcpy(y.data(), o.data(), static_cast<size_t>(o.nbytes()));
    H3_TRY(cpu_impl::vsa_gate_add(ctx, p, tiles, oc, gate, y));
    return cpu_impl::quantize_rows_fp8(ctx, y.view({o.dim(0), o.dim(1) * o.dim(2)}), out.data, out.scale);
}

Status vsa_gate_add(const Context&, const VsaGateAddParams& p, const VsaTiles& tiles, const Tensor& oc,
                    const Tensor& gate, Tensor& o) {
    const int64_t S = o.dim(0), H = o.dim(1), D = o.dim(2), n = tiles.num_tiles();
    const int32_t* row_tile = tiles.row_tiles.data_as<const int32_t>();
    const float* ocp = oc.data_as<const float>();
    const DType t = o.dtype();
#pragma omp parallel
    {
        std::vector<float> ov(static_cast<size_t>(D)), gv(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(static)
        for (int64_t r = 0; r < S; ++r)
            for (int64_t h = 0; h < H; ++h) {
                const int64_t tile = row_tile[r];
                if (tile < 0 || tile >= n) continue;
                load_f32(elem_ptr(o, (r * H + h) * D), t, ov.data(), D);
                load_f32(elem_ptr(gate, (r * H + h) * D), gate.dtype(), gv.data(), D);
                const float* c = ocp + (h * n + tile) * D;
                for (int64_t e = 0; e < D; ++e) {
                    float cv = c[e];
                    if (p.round_intermediate) cv = round_to(cv, t);
                    float prod = cv * gv[static_cast<size_t>(e)];
                    if (p.round_intermediate) prod = round_to(prod, t);
                    ov[static_cast<size_t>(e)] += prod;
                }
                store_f32(ov.data(), elem_ptr_mut(o, (r * H + h) * D), t, D);
            }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
