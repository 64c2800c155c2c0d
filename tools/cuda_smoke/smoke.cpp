// Standalone GPU check of the CUDA ops (ops/cuda): correctness against small host references and timings of
// the two big kernels at H3 shapes. Built by build_and_run.sh with nvcc directly (no spdlog/CMake needed on
// the device machine). Prints one line per check and a summary; exit 1 on any failure.
#include "core/tensor.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace h3;
using namespace h3::ops;

// core/log.cpp (spdlog) is not built here: its two entry points the linked code needs, as plain stdio.
namespace h3::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
    std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", file, line, cond, msg.c_str());
    std::abort();
}
} // namespace h3::detail

namespace h3::ops::cuda_detail {
void log_warning(const std::string& m) {
    std::printf("[warn] %s\n", m.c_str());
}
void log_info(const std::string& m) {
    std::printf("[info] %s\n", m.c_str());
}
} // namespace h3::ops::cuda_detail

namespace {

int g_fail = 0;
Context g_ctx;
std::mt19937 g_rng(1234);

// An op that returns an error is a failed check; the run goes on so that one failure does not hide the rest.
void die_if(const Status& s, const char* what) {
    if (!s.ok()) {
        std::printf("FAIL %s: %s\n", what, s.to_string().c_str());
        ++g_fail;
    }
}
template <typename T> T take(Result<T> r, const char* what) {
    if (!r.ok()) die_if(r.status(), what);
    return std::move(r).value();
}

std::vector<float> rand_vec(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = u(g_rng);
    return v;
}
// The values as stored in `t` (rounded), as f32.
std::vector<float> rounded(const std::vector<float>& v, DType t) {
    return take(to_f32_vector(host_tensor_from(v, Shape({static_cast<int64_t>(v.size())}), t)), "round");
}
Tensor dev(const std::vector<float>& v, const Shape& s, DType t) {
    return take(host_tensor_from(v, s, t).to(Device::cuda(0)), "upload");
}
Tensor dev_i(const std::vector<int64_t>& idx, DType t) {
    Tensor h = Tensor::host(Shape({static_cast<int64_t>(idx.size())}), t);
    for (size_t i = 0; i < idx.size(); ++i) h.set({static_cast<int64_t>(i)}, static_cast<double>(idx[i]));
    return take(h.to(Device::cuda(0)), "upload idx");
}
std::vector<float> back(const Tensor& t) {
    die_if(cuda_detail::cuda_status(cudaStreamSynchronize(cuda_detail::stream_of(g_ctx)), "sync"), "sync");
    Tensor h = take(t.to(Device::cpu()), "download");
    if (!h.is_contiguous()) h = take(h.contiguous(), "contig");
    return take(to_f32_vector(h), "to_f32");
}

void check(const char* name, const std::vector<float>& got, const std::vector<float>& want, double rel_tol) {
    double max_err = 0, max_ref = 1e-30;
    bool finite = true;
    for (size_t i = 0; i < want.size(); ++i) {
        if (!std::isfinite(got[i])) finite = false;
        max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - want[i]));
        max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    }
    bool ok = finite && got.size() == want.size() && max_err <= rel_tol * max_ref;
    if (!ok) ++g_fail;
    std::printf("%s %-40s max_abs_err %.3e (max |ref| %.3e, tol %.1e)\n", ok ? "PASS" : "FAIL", name, max_err,
                max_ref, rel_tol);
}

float rb(float v) {
    return round_bf16(v);
}

// ---- gemm
// ----------------------------------------------------------------------------------------------------
void test_gemm(DType in, DType out, bool bias_on, DType bias_t, bool acc, double tol, const char* name) {
    const int64_t m = 77, n = 136, k = 200;
    auto xv = rounded(rand_vec(m * k), in), wv = rounded(rand_vec(n * k), in);
    auto bv = rounded(rand_vec(n), bias_t), yv = rounded(rand_vec(m * n), out);
    Tensor x = dev(xv, {m, k}, in), w = dev(wv, {n, k}, in), y = dev(yv, {m, n}, out);
    Tensor b = bias_on ? dev(bv, {n}, bias_t) : Tensor();
    GemmParams p;
    p.alpha = 0.5f;
    p.accumulate = acc;
    die_if(cuda_impl::gemm(g_ctx, p, x, w, b, y), name);
    std::vector<float> want(m * n);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t c = 0; c < k; ++c) s += static_cast<double>(xv[i * k + c]) * wv[j * k + c];
            s *= 0.5;
            if (bias_on) s += bv[j];
            if (acc) s += yv[i * n + j];
            want[i * n + j] = static_cast<float>(s);
        }
    check(name, back(y), want, tol);
}

// ---- norms / adaln
// ----------------------------------------------------------------------------------------------
void test_norms() {
    const int64_t rows = 9, d = 5376, t_rows = 6;
    const DType bf = DType::kBF16;
    auto xv = rounded(rand_vec(rows * d, -3, 3), bf), wv = rounded(rand_vec(d, 0.5f, 1.5f), bf);
    Tensor x = dev(xv, {rows, d}, bf), w = dev(wv, {d}, bf);
    Tensor y = take(Tensor::empty({rows, d}, bf, Device::cuda(0)), "alloc");
    RmsNormParams np;
    np.round_normed = true;
    die_if(cuda_impl::rms_norm(g_ctx, np, x, w, y), "rms_norm");
    std::vector<float> normed(rows * d);
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t c = 0; c < d; ++c) ss += static_cast<double>(xv[r * d + c]) * xv[r * d + c];
        float inv = static_cast<float>(1.0 / std::sqrt(ss / d + 1e-5));
        for (int64_t c = 0; c < d; ++c) normed[r * d + c] = rb(rb(xv[r * d + c] * inv) * wv[c]);
    }
    check("rms_norm bf16 (round_normed, weight)", back(y), normed, 8e-3);

    // Tables: [T, 6D] like the AdaLN output, shift/scale as strided column slices.
    auto tv = rounded(rand_vec(t_rows * 6 * d, -0.5f, 0.5f), bf);
    Tensor table = dev(tv, {t_rows, 6 * d}, bf);
    Tensor shift = table.slice(1, 0, d), scale = table.slice(1, d, 2 * d),
           gate = table.slice(1, 2 * d, 3 * d);
    std::vector<int64_t> rowi = {0, 5, 99, 3, 1, 2, 4, 5, 0}; // 99: out of range, row left unchanged
    Tensor row = dev_i(rowi, DType::kI64);
    Tensor y2 = dev(std::vector<float>(rows * d, 7.0f), {rows, d}, bf);
    ModulateParams mp;
    mp.round_intermediate = true;
    die_if(cuda_impl::rms_norm_modulate(g_ctx, np, mp, x, w, shift, scale, row, y2), "rms_norm_modulate");
    std::vector<float> want(rows * d);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < d; ++c) {
            int64_t t = rowi[r];
            if (t >= t_rows) {
                want[r * d + c] = 7.0f;
                continue;
            }
            float m = rb(normed[r * d + c] * (1.0f + tv[t * 6 * d + d + c]));
            want[r * d + c] = rb(m + tv[t * 6 * d + c]);
        }
    check("rms_norm_modulate bf16 strided tables", back(y2), want, 8e-3);

    Tensor y3 = dev(std::vector<float>(rows * d, 7.0f), {rows, d}, DType::kF32);
    die_if(cuda_impl::modulate(g_ctx, ModulateParams{}, x, shift, scale, row, y3), "modulate");
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < d; ++c) {
            int64_t t = rowi[r];
            want[r * d + c] =
                t >= t_rows ? 7.0f : xv[r * d + c] * (1.0f + tv[t * 6 * d + d + c]) + tv[t * 6 * d + c];
        }
    check("modulate bf16->f32", back(y3), want, 1e-5);

    Tensor h = dev(xv, {rows, d}, bf);
    Tensor yy = dev(normed, {rows, d}, bf);
    Tensor row32 = dev_i(rowi, DType::kI32);
    die_if(cuda_impl::gated_residual(g_ctx, GatedResidualParams{true}, h, gate, yy, row32), "gated_residual");
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < d; ++c) {
            int64_t t = rowi[r];
            want[r * d + c] = t >= t_rows
                                  ? xv[r * d + c]
                                  : rb(xv[r * d + c] + rb(tv[t * 6 * d + 2 * d + c] * normed[r * d + c]));
        }
    check("gated_residual bf16 (i32 rows)", back(h), want, 8e-3);
}

void test_head_norm_rope() {
    const int64_t s = 5, hn = 3, dh = 128;
    const int rot = 96;
    const DType bf = DType::kBF16;
    auto xv = rounded(rand_vec(s * hn * dh, -2, 2), bf), wv = rounded(rand_vec(dh, 0.5f, 1.5f), bf);
    std::vector<float> cv(s * rot), sv(s * rot);
    for (int64_t i = 0; i < s; ++i)
        for (int c = 0; c < rot; ++c) {
            float ang = 0.37f * i * (c % (rot / 2) + 1);
            cv[i * rot + c] = std::cos(ang), sv[i * rot + c] = std::sin(ang);
        }
    Tensor x = dev(xv, {s, hn, dh}, bf), w = dev(wv, {dh}, bf);
    Tensor cs = dev(cv, {s, rot}, DType::kF32), sn = dev(sv, {s, rot}, DType::kF32);
    RmsNormParams np;
    np.round_normed = true;
    RopeParams rp;
    rp.rotary_dim = rot;
    die_if(cuda_impl::head_norm_rope(g_ctx, np, rp, x, w, cs, sn), "head_norm_rope");
    std::vector<float> want(xv.size()), n(dh);
    for (int64_t r = 0; r < s * hn; ++r) {
        const float* xr = &xv[r * dh];
        double ss = 0;
        for (int c = 0; c < dh; ++c) ss += static_cast<double>(xr[c]) * xr[c];
        float inv = static_cast<float>(1.0 / std::sqrt(ss / dh + 1e-5));
        for (int c = 0; c < dh; ++c) n[c] = rb(rb(xr[c] * inv) * wv[c]);
        int64_t pos = r / hn;
        for (int c = 0; c < dh; ++c) {
            float o = n[c];
            if (c < rot / 2)
                o = n[c] * cv[pos * rot + c] - n[c + rot / 2] * sv[pos * rot + c];
            else if (c < rot)
                o = n[c] * cv[pos * rot + c] + n[c - rot / 2] * sv[pos * rot + c];
            want[r * dh + c] = rb(o);
        }
    }
    check("head_norm_rope bf16 rot96", back(x), want, 8e-3);
}

void test_elementwise() {
    const int64_t r = 13, f = 1000;
    auto xv = rounded(rand_vec(r * 2 * f, -4, 4), DType::kBF16);
    Tensor x = dev(xv, {r, 2 * f}, DType::kBF16);
    Tensor y = take(Tensor::empty({r, f}, DType::kF32, Device::cuda(0)), "alloc");
    die_if(cuda_impl::swiglu(g_ctx, x, y), "swiglu");
    std::vector<float> want(r * f);
    for (int64_t i = 0; i < r; ++i)
        for (int64_t c = 0; c < f; ++c) {
            float g = xv[i * 2 * f + f + c];
            want[i * f + c] = xv[i * 2 * f + c] * g / (1.0f + std::exp(-g));
        }
    check("swiglu bf16->f32", back(y), want, 1e-5);

    Tensor xs = dev(xv, {r * 2 * f + 0}, DType::kBF16);
    Tensor ys = take(Tensor::empty({r * 2 * f}, DType::kBF16, Device::cuda(0)), "alloc");
    die_if(cuda_impl::silu(g_ctx, xs, ys), "silu");
    std::vector<float> ws(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) ws[i] = rb(xv[i] / (1.0f + std::exp(-xv[i])));
    check("silu bf16", back(ys), ws, 8e-3);

    auto big = rand_vec(1001, -600, 600);
    Tensor cf = dev(big, {1001}, DType::kF32);
    Tensor c8 = take(Tensor::empty({1001}, DType::kF8E4M3, Device::cuda(0)), "alloc");
    die_if(cuda_impl::cast(g_ctx, cf, c8), "cast f8");
    check("cast f32->f8e4m3 (saturating)", back(c8), rounded(big, DType::kF8E4M3), 1e-6);
    Tensor ci = take(Tensor::empty({1001}, DType::kI32, Device::cuda(0)), "alloc");
    die_if(cuda_impl::cast(g_ctx, cf, ci), "cast i32");
    std::vector<float> wi(big.size());
    for (size_t i = 0; i < big.size(); ++i) wi[i] = std::trunc(big[i]);
    check("cast f32->i32 (truncate)", back(ci), wi, 1e-7);

    Tensor a = dev(xv, {r, 2 * f}, DType::kBF16), b = dev(xv, {r, 2 * f}, DType::kF32);
    Tensor sum = take(Tensor::empty({r, 2 * f}, DType::kF16, Device::cuda(0)), "alloc");
    die_if(cuda_impl::add(g_ctx, a, b, sum), "add");
    std::vector<float> wa(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) wa[i] = 2 * xv[i];
    check("add bf16+f32->f16", back(sum), wa, 1e-3);

    std::vector<int64_t> idx = {3, 0, 12, 7, 40}; // 40 out of range: skipped
    Tensor src = dev(xv, {r, 2 * f}, DType::kBF16);
    Tensor dst = dev(std::vector<float>(5 * 2 * f, 1.0f), {5, 2 * f}, DType::kF32);
    die_if(cuda_impl::gather_rows(g_ctx, src, dev_i(idx, DType::kI32), dst), "gather");
    std::vector<float> wg(5 * 2 * f, 1.0f);
    for (int i = 0; i < 4; ++i)
        for (int64_t c = 0; c < 2 * f; ++c) wg[i * 2 * f + c] = xv[idx[i] * 2 * f + c];
    check("gather_rows bf16->f32", back(dst), wg, 0);
    Tensor dst2 = dev(std::vector<float>(r * 2 * f, 0.0f), {r, 2 * f}, DType::kBF16);
    Tensor src2 = dev(wg, {5, 2 * f}, DType::kF32);
    die_if(cuda_impl::scatter_rows(g_ctx, src2, dev_i(idx, DType::kI64), dst2), "scatter");
    std::vector<float> wsct(r * 2 * f, 0.0f);
    for (int i = 0; i < 4; ++i)
        for (int64_t c = 0; c < 2 * f; ++c) wsct[idx[i] * 2 * f + c] = wg[i * 2 * f + c];
    check("scatter_rows f32->bf16", back(dst2), wsct, 0);
}

// ---- attention
// -----------------------------------------------------------------------------------------------
void attention_ref(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                   int64_t sq, int64_t sk, int64_t h, int64_t d, std::vector<float>& o) {
    o.assign(sq * h * d, 0.0f);
    std::vector<double> s(sk);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < sq; ++i) {
            double mx = -1e300;
            for (int64_t j = 0; j < sk; ++j) {
                double dot = 0;
                for (int64_t c = 0; c < d; ++c)
                    dot += static_cast<double>(q[(i * h + hh) * d + c]) * k[(j * h + hh) * d + c];
                s[j] = dot * scale;
                mx = std::max(mx, s[j]);
            }
            double l = 0;
            for (int64_t j = 0; j < sk; ++j) l += (s[j] = std::exp(s[j] - mx));
            for (int64_t c = 0; c < d; ++c) {
                double acc = 0;
                for (int64_t j = 0; j < sk; ++j) acc += s[j] * v[(j * h + hh) * d + c];
                o[(i * h + hh) * d + c] = static_cast<float>(acc / l);
            }
        }
}

void test_attention(DType t, int64_t sq, int64_t sk, int64_t h, int64_t d, double tol, const char* name) {
    auto qv = rounded(rand_vec(sq * h * d, -2, 2), t), kv = rounded(rand_vec(sk * h * d, -2, 2), t),
         vv = rounded(rand_vec(sk * h * d), t);
    Tensor q = dev(qv, {sq, h, d}, t), k = dev(kv, {sk, h, d}, t), v = dev(vv, {sk, h, d}, t);
    Tensor o = take(Tensor::empty({sq, h, d}, t, Device::cuda(0)), "alloc");
    AttentionParams p;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    die_if(cuda_impl::attention(g_ctx, p, q, k, v, o), name);
    std::vector<float> want;
    attention_ref(qv, kv, vv, sq, sk, h, d, want);
    check(name, back(o), want, tol);
}

// ---- timing
// -------------------------------------------------------------------------------------------------
double time_ms(const std::function<void()>& fn, int iters) {
    cudaStream_t s = cuda_detail::stream_of(g_ctx);
    fn(); // warm-up (plan/heuristic build)
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    cudaEventRecord(a, s);
    for (int i = 0; i < iters; ++i) fn();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a), cudaEventDestroy(b);
    return ms / iters;
}

Tensor dev_random(const Shape& s, DType t) {
    Tensor d = take(Tensor::empty(s, t, Device::cuda(0)), "alloc");
    // uniform values via cast from an f32 device tensor (keeps the host side small: fill per chunk)
    const int64_t n = d.numel(), chunk = 1 << 24;
    for (int64_t off = 0; off < n; off += chunk) {
        int64_t m = std::min(chunk, n - off);
        Tensor src = dev(rand_vec(m), {m}, DType::kF32);
        Tensor view = d.view({n}).slice(0, off, off + m);
        die_if(cuda_impl::cast(g_ctx, src, view), "fill");
        back(view.slice(0, 0, 1)); // sync before `src` is freed
    }
    return d;
}

void bench() {
    const int64_t s = 38247, h = 56, d = 128, hidden = 5376, inner = 7168;
    const DType bf = DType::kBF16;
    {
        Tensor q = dev_random({s, h, d}, bf), k = dev_random({s, h, d}, bf), v = dev_random({s, h, d}, bf);
        Tensor o = take(Tensor::empty({s, h, d}, bf, Device::cuda(0)), "alloc");
        AttentionParams p;
        p.scale = 1.0f / std::sqrt(128.0f);
        Status st;
        std::string why;
        if (!cuda_detail::cudnn_attention_plan(
                g_ctx, cuda_detail::AttentionKey{s, s, h, d, static_cast<int>(bf)}, why)) {
            std::printf("BENCH attention skipped: no cuDNN plan (%s)\n", why.c_str());
            ++g_fail;
            return;
        }
        double ms = time_ms([&] { st = cuda_impl::attention(g_ctx, p, q, k, v, o); }, 3);
        die_if(st, "attention bench");
        double tflops = 4.0 * s * s * h * d / (ms * 1e-3) / 1e12;
        std::printf("BENCH attention bf16 S=%lld H=%lld D=%lld: %.2f ms, %.1f TFLOP/s\n", (long long)s,
                    (long long)h, (long long)d, ms, tflops);
        RmsNormParams np;
        RopeParams rp;
        rp.rotary_dim = 96;
        Tensor cs = dev_random({s, 96}, DType::kF32), sn = dev_random({s, 96}, DType::kF32);
        Tensor w = dev_random({d}, bf);
        ms = time_ms([&] { st = cuda_impl::head_norm_rope(g_ctx, np, rp, q, w, cs, sn); }, 5);
        die_if(st, "head_norm_rope bench");
        std::printf("BENCH head_norm_rope bf16 [%lld,%lld,%lld]: %.3f ms, %.0f GB/s\n", (long long)s,
                    (long long)h, (long long)d, ms, 2.0 * q.nbytes() / (ms * 1e-3) / 1e9);
    }
    {
        Tensor x = dev_random({s, inner}, bf), w = dev_random({hidden, inner}, bf);
        Tensor y = take(Tensor::empty({s, hidden}, bf, Device::cuda(0)), "alloc");
        Status st;
        GemmParams p;
        double ms = time_ms([&] { st = cuda_impl::gemm(g_ctx, p, x, w, Tensor(), y); }, 5);
        die_if(st, "gemm bench");
        std::printf("BENCH gemm bf16 M=%lld N=%lld K=%lld: %.3f ms, %.1f TFLOP/s\n", (long long)s,
                    (long long)hidden, (long long)inner, ms, 2.0 * s * hidden * inner / (ms * 1e-3) / 1e12);
        Tensor table = dev_random({6, 6 * hidden}, bf);
        Tensor shift = table.slice(1, 0, hidden), scale = table.slice(1, hidden, 2 * hidden);
        std::vector<int64_t> rows(s);
        for (int64_t i = 0; i < s; ++i) rows[i] = i % 6;
        Tensor row = dev_i(rows, DType::kI32);
        Tensor xn = x.view({-1}).slice(0, 0, s * hidden).view({s, hidden});
        RmsNormParams np;
        ms = time_ms(
            [&] {
                st = cuda_impl::rms_norm_modulate(g_ctx, np, ModulateParams{}, xn,
                                                  w.view({-1}).slice(0, 0, hidden), shift, scale, row, y);
            },
            5);
        die_if(st, "rms_norm_modulate bench");
        std::printf("BENCH rms_norm_modulate bf16 [%lld,%lld]: %.3f ms, %.0f GB/s (x read + y write)\n",
                    (long long)s, (long long)hidden, ms, 2.0 * y.nbytes() / (ms * 1e-3) / 1e9);
    }
}

} // namespace

int main(int argc, char** argv) {
    auto cctx = take(CudaContext::create(0), "CudaContext::create");
    g_ctx.device = Device::cuda(0);
    g_ctx.cuda = cctx.get();
    std::printf("cuDNN runtime %zu, SMs %d\n", cudnnGetVersion(), cctx->sm_count());

    test_gemm(DType::kBF16, DType::kBF16, true, DType::kF32, true, 8e-3, "gemm bf16->bf16 +f32 bias +acc");
    test_gemm(DType::kBF16, DType::kF32, true, DType::kBF16, false, 1e-5, "gemm bf16->f32 +bf16 bias");
    test_gemm(DType::kF16, DType::kF16, false, DType::kF32, false, 2e-3, "gemm f16->f16");
    test_gemm(DType::kF32, DType::kF32, true, DType::kF32, true, 1e-5, "gemm f32->f32 exact (no TF32)");
    test_gemm(DType::kF32, DType::kBF16, true, DType::kF32, false, 8e-3, "gemm f32->bf16 (fallback path)");
    test_norms();
    test_head_norm_rope();
    test_elementwise();
    test_attention(DType::kBF16, 300, 257, 4, 128, 2e-2, "attention bf16 D128 (cuDNN)");
    test_attention(DType::kF16, 129, 200, 3, 64, 5e-3, "attention f16 D64 (cuDNN)");
    test_attention(DType::kF32, 70, 90, 2, 72, 1e-4, "attention f32 D72 (fallback)");
    test_attention(DType::kBF16, 45, 33, 2, 96, 2e-2, "attention bf16 D96 (fallback)");
    if (argc < 2 || std::string(argv[1]) != "--no-bench") bench();
    std::printf("%s: %d failure(s)\n", g_fail ? "FAIL" : "PASS", g_fail);
    return g_fail ? 1 : 0;
}
