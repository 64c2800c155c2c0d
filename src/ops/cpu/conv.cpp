// CPU references for conv1d / conv_transpose1d (im2col / col2im around OpenBLAS sgemm, fp32) and the BigVGAN
// activations (direct loops, fp32 with double-free arithmetic in the same order as the PyTorch modules).
// The convolutions run their sgemm in column blocks of about kCancelCheckMacs multiply-adds and the
// activation reads the flag per channel row: a cancelled job (ops/cancel.h) stops between them.
#include "ops/cancel.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace h3::ops::cpu_impl {

Status conv1d(const Context&, const Conv1dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y) {
    const int64_t nb = x.dim(0), cin = x.dim(1), len = x.dim(2);
    const int64_t cout = w.dim(0), k = w.dim(2), lout = y.dim(2);
    const int64_t cig = cin / p.groups, cog = cout / p.groups, rows = cig * k;
    const float* xp = x.data_as<const float>();
    const float* wp = w.data_as<const float>();
    const float* bp = bias.defined() ? bias.data_as<const float>() : nullptr;
    float* yp = y.data_as<float>();
    // Output columns per sgemm (the im2col block [rows, nc]).
    const int64_t chunk = std::clamp<int64_t>(kCancelCheckMacs / std::max<int64_t>(rows * cog, 1), 1,
                                              std::max<int64_t>(lout, 1));
    const std::atomic<bool>* cancel = cancel_flag();
    std::vector<float> col(static_cast<size_t>(rows * std::min(chunk, lout)));
    for (int64_t b = 0; b < nb; ++b) {
        for (int64_t g = 0; g < p.groups; ++g) {
            const float* xg = xp + (b * cin + g * cig) * len;
            float* yg = yp + (b * cout + g * cog) * lout;
            for (int64_t t0 = 0; t0 < lout; t0 += chunk) {
                if (cancel_requested(cancel)) return cancelled_in("conv1d");
                const int64_t nc = std::min(chunk, lout - t0);
#pragma omp parallel for schedule(static)
                for (int64_t r = 0; r < rows; ++r) {
                    const int64_t ci = r / k, kk = r % k;
                    float* c = col.data() + r * nc;
                    const int64_t off = kk * p.dilation - p.padding;
                    for (int64_t t = 0; t < nc; ++t) {
                        const int64_t s = (t0 + t) * p.stride + off;
                        c[t] = (s >= 0 && s < len) ? xg[ci * len + s] : 0.0f;
                    }
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(cog),
                            static_cast<int>(nc), static_cast<int>(rows), 1.0f, wp + g * cog * rows,
                            static_cast<int>(rows), col.data(), static_cast<int>(nc), 0.0f, yg + t0,
                            static_cast<int>(lout));
            }
            if (bp) {
#pragma omp parallel for schedule(static)
                for (int64_t co = 0; co < cog; ++co)
                    for (int64_t t = 0; t < lout; ++t) yg[co * lout + t] += bp[g * cog + co];
            }
        }
    }
    return ok_status();
}

Status conv_transpose1d(const Context&, const ConvTranspose1dParams& p, const Tensor& x, const Tensor& w,
                        const Tensor& bias, Tensor& y) {
    const int64_t nb = x.dim(0), cin = x.dim(1), len = x.dim(2);
    const int64_t k = w.dim(2), lout = y.dim(2);
    const int64_t cig = cin / p.groups, cog = w.dim(1), cout = cog * p.groups, cols = cog * k;
    const float* xp = x.data_as<const float>();
    const float* wp = w.data_as<const float>();
    const float* bp = bias.defined() ? bias.data_as<const float>() : nullptr;
    float* yp = y.data_as<float>();
    std::vector<float> tmp(static_cast<size_t>(cols * len));
    // Input columns per sgemm.
    const int64_t chunk = std::clamp<int64_t>(kCancelCheckMacs / std::max<int64_t>(cols * cig, 1), 1,
                                              std::max<int64_t>(len, 1));
    const std::atomic<bool>* cancel = cancel_flag();
    for (int64_t b = 0; b < nb; ++b) {
        for (int64_t g = 0; g < p.groups; ++g) {
            // tmp [Cout_g·K, L] = W_gᵀ x_g, W_g viewed as [Cin_g, Cout_g·K].
            for (int64_t l0 = 0; l0 < len; l0 += chunk) {
                if (cancel_requested(cancel)) return cancelled_in("conv_transpose1d");
                const int64_t nc = std::min(chunk, len - l0);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(cols),
                            static_cast<int>(nc), static_cast<int>(cig), 1.0f, wp + g * cig * cols,
                            static_cast<int>(cols), xp + (b * cin + g * cig) * len + l0,
                            static_cast<int>(len), 0.0f, tmp.data() + l0, static_cast<int>(len));
            }
#pragma omp parallel for schedule(static)
            for (int64_t co = 0; co < cog; ++co) {
                float* yr = yp + (b * cout + g * cog + co) * lout;
                const float bv = bp ? bp[g * cog + co] : 0.0f;
                for (int64_t t = 0; t < lout; ++t) yr[t] = bv;
                for (int64_t kk = 0; kk < k; ++kk) {
                    const float* tr = tmp.data() + (co * k + kk) * len;
                    for (int64_t l = 0; l < len; ++l) {
                        const int64_t t = l * p.stride + kk - p.padding;
                        if (t >= 0 && t < lout) yr[t] += tr[l];
                    }
                }
            }
        }
    }
    return ok_status();
}

namespace {

inline float snake(float v, float a, float inv_b) {
    const float s = std::sin(a * v);
    return v + inv_b * (s * s);
}

} // namespace

Status snake_beta(const Context&, const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y) {
    const int64_t nb = x.dim(0), c = x.dim(1), len = x.dim(2);
    const float* xp = x.data_as<const float>();
    float* yp = y.data_as<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nb * c; ++r) {
        const int64_t ch = r % c;
        const float a = std::exp(alpha.data_as<const float>()[ch]);
        const float inv_b = 1.0f / (std::exp(beta.data_as<const float>()[ch]) + 1e-9f);
        for (int64_t t = 0; t < len; ++t) yp[r * len + t] = snake(xp[r * len + t], a, inv_b);
    }
    return ok_status();
}

// The reciprocal and the products in torch's order: x + (alpha + 1e-9)^-1 · sin(alpha·x)².
Status snake(const Context&, const Tensor& x, const Tensor& alpha, Tensor& y) {
    const int64_t nb = x.dim(0), c = x.dim(1), len = x.dim(2);
    const float* xp = x.data_as<const float>();
    float* yp = y.data_as<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nb * c; ++r) {
        const float a = alpha.data_as<const float>()[r % c];
        const float inv = 1.0f / (a + 1e-9f);
        for (int64_t t = 0; t < len; ++t) yp[r * len + t] = snake(xp[r * len + t], a, inv);
    }
    return ok_status();
}

Status alias_free_snake_beta(const Context&, const AliasFreeParams& p, const Tensor& x, const Tensor& alpha,
                             const Tensor& beta, const Tensor& up_filter, const Tensor& down_filter,
                             Tensor& y) {
    const int64_t nb = x.dim(0), c = x.dim(1), len = x.dim(2), k = up_filter.dim(0);
    const int64_t r = p.ratio, pad = k / r - 1, crop_left = pad * r + (k - r) / 2;
    const int64_t up_len = r * len, down_pad_left = k / 2 - 1;
    const float* fu = up_filter.data_as<const float>();
    const float* fd = down_filter.data_as<const float>();
    const float* xp = x.data_as<const float>();
    float* yp = y.data_as<float>();
    const std::atomic<bool>* cancel = cancel_flag();
#pragma omp parallel
    {
        std::vector<float> s(static_cast<size_t>(up_len));
#pragma omp for schedule(static)
        for (int64_t row = 0; row < nb * c; ++row) {
            if (cancel_requested(cancel)) continue;
            const int64_t ch = row % c;
            const float a = std::exp(alpha.data_as<const float>()[ch]);
            const float inv_b = 1.0f / (std::exp(beta.data_as<const float>()[ch]) + 1e-9f);
            const float* xr = xp + row * len;
            // up: u[m] = r · Σ_i xpad[i] · f[m + crop_left − r·i], xpad[i] = x[clamp(i − pad)].
            for (int64_t m = 0; m < up_len; ++m) {
                const int64_t n = m + crop_left;
                float acc = 0.0f;
                for (int64_t i = std::max<int64_t>(0, (n - k + r) / r); i * r <= n; ++i) {
                    const int64_t tap = n - r * i;
                    if (tap >= k) continue;
                    const int64_t src = std::clamp<int64_t>(i - pad, 0, len - 1);
                    acc += xr[src] * fu[tap];
                }
                s[static_cast<size_t>(m)] = snake(static_cast<float>(r) * acc, a, inv_b);
            }
            // down: y[t] = Σ_j f[j] · s[clamp(r·t + j − pad_left)].
            for (int64_t t = 0; t < len; ++t) {
                float acc = 0.0f;
                for (int64_t j = 0; j < k; ++j) {
                    const int64_t src = std::clamp<int64_t>(r * t + j - down_pad_left, 0, up_len - 1);
                    acc += fd[j] * s[static_cast<size_t>(src)];
                }
                yp[row * len + t] = acc;
            }
        }
    }
    return cancel_requested(cancel) ? cancelled_in("alias_free_snake_beta") : ok_status();
}

Status scale(const Context&, float alpha, const Tensor& x, Tensor& y) {
    const int64_t n = x.numel();
    const float* xp = x.data_as<const float>();
    float* yp = y.data_as<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) yp[i] = alpha * xp[i];
    return ok_status();
}

Status clamp(const Context&, float lo, float hi, const Tensor& x, Tensor& y) {
    const int64_t n = x.numel();
    const float* xp = x.data_as<const float>();
    float* yp = y.data_as<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) yp[i] = std::min(hi, std::max(lo, xp[i]));
    return ok_status();
}

Status layer_norm(const Context&, const LayerNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y) {
    const int64_t rows = x.dim(0), d = x.dim(1);
    std::vector<float> wf, bf;
    if (weight.defined()) {
        wf.resize(static_cast<size_t>(d));
        load_f32(weight.data(), weight.dtype(), wf.data(), d);
    }
    if (bias.defined()) {
        bf.resize(static_cast<size_t>(d));
        load_f32(bias.data(), bias.dtype(), bf.data(), d);
    }
    const size_t xs = dtype_size(x.dtype()), ys = dtype_size(y.dtype());
#pragma omp parallel
    {
        std::vector<float> v(static_cast<size_t>(d));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            load_f32(static_cast<const uint8_t*>(x.data()) + r * d * static_cast<int64_t>(xs), x.dtype(),
                     v.data(), d);
            double sum = 0.0;
            for (int64_t i = 0; i < d; ++i) sum += v[static_cast<size_t>(i)];
            const double mean = sum / static_cast<double>(d);
            double sq = 0.0;
            for (int64_t i = 0; i < d; ++i) {
                const double e = v[static_cast<size_t>(i)] - mean;
                sq += e * e;
            }
            const double inv = 1.0 / std::sqrt(sq / static_cast<double>(d) + p.eps);
            for (int64_t i = 0; i < d; ++i) {
                float n = static_cast<float>((v[static_cast<size_t>(i)] - mean) * inv);
                if (!wf.empty()) n *= wf[static_cast<size_t>(i)];
                if (!bf.empty()) n += bf[static_cast<size_t>(i)];
                v[static_cast<size_t>(i)] = n;
            }
            store_f32(v.data(), static_cast<uint8_t*>(y.data()) + r * d * static_cast<int64_t>(ys), y.dtype(),
                      d);
        }
    }
    return ok_status();
}

} // namespace h3::ops::cpu_impl
