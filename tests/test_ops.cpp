// Op tests. Default (CPU): each CPU reference is compared with a naive double-precision loop written here.
// With `--backend cuda` (or H3_TEST_BACKEND=cuda) each op runs on cuda:0 and is compared with the CPU
// reference on the same inputs. Every case checks NaN/Inf in the output and guard bytes around it.
//
// Tolerances: |got - want| <= atol + rtol·|want|, stated per op and output dtype in the tables below.
// Rounding once to the output dtype costs 0.5 ulp (bf16 2^-9, f16 2^-12 relative); fp32 vs double
// arithmetic can push a value across a rounding boundary, so the float-output tolerances are ~2 ulp. GEMM and
// attention accumulate K (or Sk) fp32 products, so their f32 tolerance grows with the reduction length.
#include "core/cuda_api.h"
#include "core/dtype.h"
#include "core/staging.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "op_harness.h"
#include "ops/graph.h"
#include "ops/ops.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_context.h"
#include "ops/cuda/tensor_map.h"
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace h3::ops {
namespace {

using namespace harness;

// ---- tensors ---------------------------------------------------------------------------------------------

Tensor indices(const std::vector<int64_t>& v, DType dt) {
    Tensor t = Tensor::host(Shape{static_cast<int64_t>(v.size())}, dt);
    for (size_t i = 0; i < v.size(); ++i) store_from_f64(t.data(), dt, i, static_cast<double>(v[i]));
    return t;
}

std::vector<int64_t> random_rows(int64_t n, int64_t limit, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int64_t> dist(0, limit - 1);
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = dist(gen);
    return v;
}

// A table view [rows, cols] with row pitch `pitch` >= cols, over a host buffer filled with random values
// (the padding columns are random too, so reading them by mistake shows up).
Tensor strided_table(int64_t rows, int64_t cols, int64_t pitch, DType dt, uint32_t seed) {
    Tensor full = rnd(Shape{rows, pitch}, dt, seed, -0.5f, 0.5f);
    return full.slice(1, 0, cols);
}

// Same view on the backend: copy the whole padded buffer, then slice.
Tensor dev_table(const Tensor& table, int64_t pitch) {
    if (!on_cuda()) return table;
    Tensor full =
        Tensor::from_storage(table.storage(), table.byte_offset(), Shape{table.dim(0), pitch}, table.dtype());
    return dev(full).slice(1, 0, table.dim(1));
}

// The value `v` has after a store to float dtype `t`.
double rnd_to(double v, DType t) {
    const float f = static_cast<float>(v);
    return t == DType::kBF16 ? round_bf16(f) : (t == DType::kF16 ? round_f16(f) : f);
}

std::string name(DType t) {
    return dtype_name(t);
}

const DType kFloats[] = {DType::kF32, DType::kBF16, DType::kF16};

// Pointwise ops: output rounding (0.5 ulp) plus a possible boundary crossing of fp32 vs double math.
constexpr TolTable kPointTol{{1e-6, 1e-5}, {1e-2, 8e-3}, {2e-3, 1e-3}};
// GEMM: K ≤ 129 fp32 products of |x|,|w| ≤ 2; blocked sgemm sums differ from double by ≲1e-4.
constexpr TolTable kGemmTol{{2e-4, 1e-5}, {2e-2, 8e-3}, {4e-3, 1e-3}};
// Attention: Sk ≤ 70 exp-weighted fp32 dot products of D ≤ 128; outputs are convex mixes of v (|v| ≤ 2).
constexpr TolTable kAttnTol{{2e-5, 1e-4}, {1e-2, 8e-3}, {2e-3, 1e-3}};
// Row moves and casts are exact: the only change is the store rounding, which the naive loop reproduces.
constexpr TolTable kExactTol{{0, 0}, {0, 0}, {0, 0}};

// ---- GEMM ------------------------------------------------------------------------------------------------
struct GemmCase {
    int64_t m, n, k;
    bool bias, accumulate;
    float alpha;
};
const GemmCase kGemmCases[] = {{1, 1, 1, false, false, 1.0f},
                               {7, 13, 5, true, false, 1.0f},
                               {33, 17, 64, true, true, 0.5f},
                               {64, 96, 129, false, true, 1.0f},
                               {3, 200, 31, true, false, 2.0f}};

TEST(Ops, Gemm) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 1;
    for (const auto& c : kGemmCases)
        for (DType in : kFloats)
            for (DType out : {in, DType::kF32}) {
                SCOPED_TRACE("gemm m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                             " k=" + std::to_string(c.k) + " " + name(in) + "->" + name(out));
                Tensor x = rnd({c.m, c.k}, in, seed++), w = rnd({c.n, c.k}, in, seed++);
                Tensor b = c.bias ? rnd({c.n}, in, seed++) : Tensor();
                Tensor y0 = rnd({c.m, c.n}, out, seed++);
                GemmParams p{.alpha = c.alpha, .accumulate = c.accumulate};
                std::vector<double> want;
                if (on_cuda()) {
                    Tensor y = clone(y0);
                    ASSERT_OK(gemm(Context::cpu(), p, x, w, b, y));
                    want = values(y);
                } else {
                    auto xv = values(x), wv = values(w), yv = values(y0);
                    auto bv = c.bias ? values(b) : std::vector<double>(c.n, 0.0);
                    for (int64_t i = 0; i < c.m; ++i)
                        for (int64_t j = 0; j < c.n; ++j) {
                            double acc = 0;
                            for (int64_t l = 0; l < c.k; ++l) acc += xv[i * c.k + l] * wv[j * c.k + l];
                            double v = c.alpha * acc + bv[j] + (c.accumulate ? yv[i * c.n + j] : 0.0);
                            want.push_back(v);
                        }
                }
                Guarded y(y0);
                ASSERT_OK(gemm(ctx(), p, dev(x), dev(w), dev(b), y.t));
                check_output(y, want, kGemmTol.of(out));
            }
}

// ---- RMSNorm (naive helper shared with the fused ops) -----------------------------------------------------
std::vector<double> naive_rms_norm(const std::vector<double>& x, int64_t rows, int64_t d,
                                   const std::vector<double>* w, float eps, bool round_normed, DType out) {
    std::vector<double> y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t c = 0; c < d; ++c) ss += x[r * d + c] * x[r * d + c];
        const double inv = 1.0 / std::sqrt(ss / d + eps);
        for (int64_t c = 0; c < d; ++c) {
            double v = x[r * d + c] * inv;
            if (round_normed) v = rnd_to(v, out);
            if (w) v *= (*w)[c];
            y[r * d + c] = v;
        }
    }
    return y;
}

struct NormCase {
    int64_t rows, d;
    bool weight, round_normed;
    float eps;
};
const NormCase kNormCases[] = {{1, 1, false, false, 1e-5f},
                               {3, 7, true, false, 1e-5f},
                               {17, 128, true, true, 1e-6f},
                               {5, 1000, false, true, 1e-5f}};

TEST(Ops, RmsNorm) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 100;
    for (const auto& c : kNormCases)
        for (DType in : kFloats)
            for (DType out : {in, DType::kF32}) {
                SCOPED_TRACE("rms_norm " + std::to_string(c.rows) + "x" + std::to_string(c.d) + " " +
                             name(in) + "->" + name(out) + (c.round_normed ? " round_normed" : ""));
                Tensor x = rnd({c.rows, c.d}, in, seed++);
                Tensor w = c.weight ? rnd({c.d}, in, seed++) : Tensor();
                Tensor y0 = Tensor::host({c.rows, c.d}, out);
                RmsNormParams p{.eps = c.eps, .round_normed = c.round_normed};
                std::vector<double> want;
                if (on_cuda()) {
                    Tensor y = clone(y0);
                    ASSERT_OK(rms_norm(Context::cpu(), p, x, w, y));
                    want = values(y);
                } else {
                    std::vector<double> wv = c.weight ? values(w) : std::vector<double>();
                    want = naive_rms_norm(values(x), c.rows, c.d, c.weight ? &wv : nullptr, c.eps,
                                          c.round_normed, out);
                }
                Guarded y(y0);
                ASSERT_OK(rms_norm(ctx(), p, dev(x), dev(w), y.t));
                check_output(y, want, kPointTol.of(out));
            }
}

// ---- elementwise -----------------------------------------------------------------------------------------
const std::pair<int64_t, int64_t> kEltShapes[] = {{1, 1}, {3, 5}, {13, 257}, {2, 5000}};

double naive_silu(double v) {
    return v / (1.0 + std::exp(-v));
}

TEST(Ops, SiluGeluSwigluGegluTransposeAdd) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 200;
    for (auto [r, c] : kEltShapes)
        for (DType in : kFloats)
            for (DType out : {in, DType::kF32}) {
                SCOPED_TRACE(std::to_string(r) + "x" + std::to_string(c) + " " + name(in) + "->" + name(out));
                Tensor x = rnd({r, 2 * c}, in, seed++, -8.0f, 8.0f), z = rnd({r, 2 * c}, in, seed++);
                auto xv = values(x), zv = values(z);
                {
                    SCOPED_TRACE("silu");
                    Tensor y0 = Tensor::host({r, 2 * c}, out);
                    std::vector<double> want;
                    if (on_cuda()) {
                        Tensor y = clone(y0);
                        ASSERT_OK(silu(Context::cpu(), x, y));
                        want = values(y);
                    } else {
                        for (double v : xv) want.push_back(naive_silu(v));
                    }
                    Guarded y(y0);
                    ASSERT_OK(silu(ctx(), dev(x), y.t));
                    check_output(y, want, kPointTol.of(out));
                }
                for (bool tanh : {false, true}) {
                    SCOPED_TRACE(tanh ? "gelu tanh" : "gelu erf");
                    Tensor y0 = Tensor::host({r, 2 * c}, out);
                    std::vector<double> want;
                    if (on_cuda()) {
                        Tensor y = clone(y0);
                        ASSERT_OK(gelu(Context::cpu(), {.tanh = tanh}, x, y));
                        want = values(y);
                    } else {
                        for (double v : xv)
                            want.push_back(tanh ? 0.5 * v *
                                                      (1.0 + std::tanh(std::sqrt(2.0 / M_PI) *
                                                                       (v + 0.044715 * v * v * v)))
                                                : 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
                    }
                    Guarded y(y0);
                    ASSERT_OK(gelu(ctx(), {.tanh = tanh}, dev(x), y.t));
                    check_output(y, want, kPointTol.of(out));
                }
                {
                    SCOPED_TRACE("swiglu");
                    Tensor y0 = Tensor::host({r, c}, out);
                    std::vector<double> want;
                    if (on_cuda()) {
                        Tensor y = clone(y0);
                        ASSERT_OK(swiglu(Context::cpu(), x, y));
                        want = values(y);
                    } else {
                        for (int64_t i = 0; i < r; ++i)
                            for (int64_t j = 0; j < c; ++j)
                                want.push_back(xv[i * 2 * c + j] * naive_silu(xv[i * 2 * c + c + j]));
                    }
                    Guarded y(y0);
                    ASSERT_OK(swiglu(ctx(), dev(x), y.t));
                    check_output(y, want, kPointTol.of(out));
                }
                for (bool tanh : {false, true}) {
                    SCOPED_TRACE(tanh ? "geglu tanh" : "geglu erf");
                    Tensor y0 = Tensor::host({r, c}, out);
                    std::vector<double> want;
                    if (on_cuda()) {
                        Tensor y = clone(y0);
                        ASSERT_OK(geglu(Context::cpu(), {.tanh = tanh}, x, y));
                        want = values(y);
                    } else {
                        for (int64_t i = 0; i < r; ++i)
                            for (int64_t j = 0; j < c; ++j) {
                                const double g = xv[i * 2 * c + c + j];
                                const double gl = tanh ? 0.5 * g *
                                                             (1.0 + std::tanh(std::sqrt(2.0 / M_PI) *
                                                                              (g + 0.044715 * g * g * g)))
                                                       : 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0)));
                                want.push_back(xv[i * 2 * c + j] * gl);
                            }
                    }
                    Guarded y(y0);
                    ASSERT_OK(geglu(ctx(), {.tanh = tanh}, dev(x), y.t));
                    check_output(y, want, kPointTol.of(out));
                }
                {
                    SCOPED_TRACE("transpose");
                    Tensor y0 = Tensor::host({2 * c, r}, in);
                    std::vector<double> want;
                    for (int64_t j = 0; j < 2 * c; ++j)
                        for (int64_t i = 0; i < r; ++i)
                            want.push_back(xv[i * 2 * c + j]); // bits moved, exact
                    Guarded y(y0);
                    ASSERT_OK(transpose(ctx(), dev(x), y.t));
                    check_output(y, want, kExactTol.of(in));
                }
                {
                    SCOPED_TRACE("add");
                    Tensor y0 = Tensor::host({r, 2 * c}, out);
                    std::vector<double> want;
                    if (on_cuda()) {
                        Tensor y = clone(y0);
                        ASSERT_OK(add(Context::cpu(), x, z, y));
                        want = values(y);
                    } else {
                        for (size_t i = 0; i < xv.size(); ++i) want.push_back(xv[i] + zv[i]);
                    }
                    Guarded y(y0);
                    ASSERT_OK(add(ctx(), dev(x), dev(z), y.t));
                    check_output(y, want, kPointTol.of(out));
                }
            }
}

// The step caches' arithmetic: axpby (bit-exact across backends, in place) and the relative-L1 sums.

TEST(Ops, GeluErfKeepsRelativeAccuracyForNegativeInputs) {
    // x·Φ(x) for x down to −10 is tiny but a normal fp32 number: 1 + erf(x/√2) in fp32 cancels (at x = −4 it
    // keeps ~3 digits, below −5.5 none), erfc(−x/√2) does not. Relative error against double-precision erfc,
    // for gelu and for geglu (value 1 and 3), on the backend under test (the CPU reference included). The
    // bound is the function's own conditioning: rounding x/√2 to fp32 (2⁻²⁴) moves erfc by ≈ x² times that,
    // so (8 + 2x²)·2⁻²⁴ (≈ 1.3e-5 at x = −10, 2.4e-6 at x = −4, where the 1 + erf form is off by ~1e-3).
    SKIP_IF_NO_BACKEND();
    const int64_t n = 2048;
    Tensor x = Tensor::host({1, 2 * n}, DType::kF32);
    float* xp = x.data_as<float>();
    for (int64_t i = 0; i < n; ++i) {
        xp[i] = i % 2 ? 3.0f : 1.0f;                                                // geglu values
        xp[n + i] = -10.0f + 12.0f * static_cast<float>(i) / static_cast<float>(n); // gates in [−10, 2)
    }
    auto exact = [](double g) { return 0.5 * g * std::erfc(-g / std::sqrt(2.0)); };
    auto check = [&](const Guarded& got, int64_t count, auto want_of) {
        const double eps = std::ldexp(1.0, -24);
        EXPECT_TRUE(got.guards_intact()) << "the op wrote outside its output";
        const std::vector<double> v_all = values(got.host());
        ASSERT_EQ(static_cast<int64_t>(v_all.size()), count);
        int bad = 0;
        double worst = 0;
        for (int64_t i = 0; i < count; ++i) {
            const double want = want_of(i), v = v_all[static_cast<size_t>(i)];
            const double g = xp[n + i], bound = (8.0 + 2.0 * g * g) * eps;
            const double rel = std::fabs(v - want) / std::fabs(want);
            worst = std::max(worst, rel / bound);
            bad += !(rel <= bound);
        }
        EXPECT_EQ(bad, 0) << "worst relative error " << worst << " of the bound";
    };
    {
        SCOPED_TRACE("gelu erf");
        Tensor gates = Tensor::host({1, n}, DType::kF32);
        std::memcpy(gates.data(), xp + n, static_cast<size_t>(n) * sizeof(float));
        Guarded y(Tensor::host({1, n}, DType::kF32));
        ASSERT_OK(gelu(ctx(), {.tanh = false}, dev(gates), y.t));
        check(y, n, [&](int64_t i) { return exact(xp[n + i]); });
    }
    {
        SCOPED_TRACE("geglu erf");
        Guarded y(Tensor::host({1, n}, DType::kF32));
        ASSERT_OK(geglu(ctx(), {.tanh = false}, dev(x), y.t));
        check(y, n, [&](int64_t i) { return xp[i] * exact(xp[n + i]); });
    }
}
TEST(Ops, AxpbyAndL1Sums) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 900;
    const std::vector<std::pair<float, float>> coeffs = {
        {1.0f, 1.0f}, {1.0f, -1.0f}, {0.5f, -0.5f}, {0.3f, 1.7f}};
    for (auto [r, c] : kEltShapes)
        for (DType in : kFloats)
            for (DType out : {in, DType::kF32}) {
                SCOPED_TRACE(std::to_string(r) + "x" + std::to_string(c) + " " + name(in) + "->" + name(out));
                Tensor x = rnd({r, c}, in, seed++), z = rnd({r, c}, DType::kF32, seed++);
                auto xv = values(x), zv = values(z);
                for (auto [a, b] : coeffs) {
                    SCOPED_TRACE("axpby " + std::to_string(a) + " " + std::to_string(b));
                    Tensor y0 = Tensor::host({r, c}, out);
                    Tensor want_t = clone(y0);
                    ASSERT_OK(axpby(Context::cpu(), a, x, b, z, want_t));
                    std::vector<double> want = values(want_t);
                    if (!on_cuda()) { // the reference itself against the formula, one rounding at the store
                        for (size_t i = 0; i < xv.size(); ++i) {
                            const float p = a * static_cast<float>(xv[i]), q = b * static_cast<float>(zv[i]);
                            const double w = rnd_to(p + q, out);
                            ASSERT_EQ(want[i], w) << "element " << i;
                        }
                    }
                    Guarded y(y0);
                    ASSERT_OK(axpby(ctx(), a, dev(x), b, dev(z), y.t));
                    check_output(y, want, Tol{0, 0}); // no fma anywhere: bit for bit
                }
                { // in place: y aliases x
                    SCOPED_TRACE("axpby in place");
                    Tensor want_t = clone(x);
                    ASSERT_OK(axpby(Context::cpu(), 1.0f, want_t, 1.0f, z, want_t));
                    Guarded y(x);
                    ASSERT_OK(axpby(ctx(), 1.0f, y.t, 1.0f, dev(z), y.t));
                    check_output(y, values(want_t), Tol{0, 0});
                }
                { // l1 sums against a double loop
                    SCOPED_TRACE("l1_sums");
                    double d = 0, m = 0;
                    for (size_t i = 0; i < xv.size(); ++i) {
                        d += std::fabs(xv[i] - zv[i]);
                        m += std::fabs(zv[i]);
                    }
                    auto s = l1_sums(ctx(), dev(x), dev(z));
                    ASSERT_TRUE(s.ok()) << s.status().to_string();
                    EXPECT_NEAR(s->diff, d, 1e-12 * d);
                    EXPECT_NEAR(s->ref, m, 1e-12 * m);
                    auto rel = rel_l1(ctx(), dev(x), dev(z));
                    ASSERT_TRUE(rel.ok());
                    EXPECT_NEAR(*rel, d / m, 1e-12);
                }
            }
    Tensor one = rnd({4, 8}, DType::kF32, 7, 1.0f, 2.0f);
    Tensor zeros_host = Tensor::host({4, 8}, DType::kF32);
    std::memset(zeros_host.data(), 0, zeros_host.nbytes());
    Tensor zd = dev(zeros_host);
    auto r00 = rel_l1(ctx(), zd, zd);
    ASSERT_TRUE(r00.ok());
    EXPECT_EQ(*r00, 0.0); // 0/0 → 0
    auto rx0 = rel_l1(ctx(), dev(one), zd);
    ASSERT_TRUE(rx0.ok());
    EXPECT_TRUE(std::isinf(*rx0)); // x/0 → inf
}

// ---- int8 weights and the non-finite flag -----------------------------------------------------------------
TEST(Ops, DequantizeRowsAndNonfinite) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 1300;
    // K % 16 == 0 (the CUDA vector path), odd K and one row (the scalar path).
    for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 64}, {5, 37}, {1, 3}, {33, 272}}) {
        Tensor q = Tensor::host({n, k}, DType::kI8);
        std::mt19937 gen(seed++);
        std::uniform_int_distribution<int> dist(-127, 127);
        for (int64_t i = 0; i < q.numel(); ++i) q.data_as<int8_t>()[i] = static_cast<int8_t>(dist(gen));
        Tensor sc = rnd({n}, DType::kF32, seed++, 1e-4f, 0.05f);
        for (DType out : kFloats) {
            SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(k) + " -> " + name(out));
            Tensor want_t = Tensor::host({n, k}, out);
            ASSERT_OK(dequantize_rows(Context::cpu(), q, sc, want_t));
            std::vector<double> want = values(want_t);
            if (!on_cuda()) // the reference against the formula: one fp32 product, one rounding
                for (int64_t r = 0; r < n; ++r)
                    for (int64_t j = 0; j < k; ++j) {
                        const float p =
                            static_cast<float>(q.data_as<int8_t>()[r * k + j]) * sc.data_as<float>()[r];
                        ASSERT_EQ(want[static_cast<size_t>(r * k + j)], rnd_to(p, out));
                    }
            Guarded w(Tensor::host({n, k}, out));
            ASSERT_OK(dequantize_rows(ctx(), dev(q), dev(sc), w.t));
            check_output(w, want, Tol{0, 0}); // bit for bit
        }
    }
    // The flag: set by an inf or a NaN anywhere (any float dtype), never cleared.
    for (DType dt : kFloats) {
        SCOPED_TRACE(name(dt));
        Tensor x = rnd({37, 129}, dt, seed++);
        Tensor flag_h = Tensor::host({3}, DType::kI32);
        Tensor flag = dev(flag_h);
        Tensor f0 = flag.slice(0, 0, 1), f1 = flag.slice(0, 1, 2), f2 = flag.slice(0, 2, 3);
        ASSERT_OK(mark_nonfinite(ctx(), dev(x), f0));
        Tensor bad = clone(x);
        bad.set({36, 128}, std::numeric_limits<double>::infinity());
        ASSERT_OK(mark_nonfinite(ctx(), dev(bad), f1));
        bad.set({36, 128}, 0.0);
        bad.set({0, 3}, std::numeric_limits<double>::quiet_NaN());
        ASSERT_OK(mark_nonfinite(ctx(), dev(bad), f2));
        ASSERT_OK(mark_nonfinite(ctx(), dev(x), f2)); // a finite tensor leaves the flag set
        std::vector<double> got = values(flag);
        EXPECT_EQ(got, (std::vector<double>{0, 1, 1}));
    }
    Tensor q = Tensor::host({2, 3}, DType::kI8), w = Tensor::host({2, 3}, DType::kBF16);
    Tensor sc = Tensor::host({3}, DType::kF32);
    Status st = dequantize_rows(Context::cpu(), q, sc, w);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("scale"), std::string::npos) << st.message();
}

// The sampling loop's Euler step: the CPU reference against the formula written out here (each operation
// rounded in fp32), CUDA against the CPU bit for bit; in place on odd and vector-friendly sizes.
TEST(Ops, EulerUpdate) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 1300;
    const EulerParams steps[] = {{.timestep = 0.9f, .sigma = 0.9f, .sigma_next = 0.8f},
                                 {.timestep = 0.37f, .sigma = 0.41f, .sigma_next = 0.0f},
                                 {.timestep = 0.05f, .sigma = 0.0625f, .sigma_next = 0.03f}};
    for (int64_t n : {1, 7, 8, 1000, 4099}) {
        for (const EulerParams& p : steps) {
            SCOPED_TRACE("n " + std::to_string(n) + " t " + std::to_string(p.timestep));
            Tensor x = rnd({n}, DType::kF32, seed++), v = rnd({n}, DType::kF32, seed++);
            Tensor want_t = clone(x);
            ASSERT_OK(euler_update(Context::cpu(), p, want_t, v));
            std::vector<double> want = values(want_t);
            if (!on_cuda()) {
                const float st = 1.0f - p.timestep, r = p.sigma_next / p.sigma, om = 1.0f - r;
                const auto xv = values(x), vv = values(v);
                for (size_t i = 0; i < xv.size(); ++i) {
                    const float xi = static_cast<float>(xv[i]), vi = static_cast<float>(vv[i]);
                    volatile float sv = st * vi, d = xi + sv, a = r * xi, b = om * d; // no contraction
                    ASSERT_EQ(want[i], static_cast<double>(a + b)) << "element " << i;
                }
            }
            Guarded y(x);
            ASSERT_OK(euler_update(ctx(), p, y.t, dev(v)));
            check_output(y, want, Tol{0, 0});
        }
    }
    Tensor a = rnd({4, 3}, DType::kF32, 1), b = rnd({3, 4}, DType::kF32, 2), h = rnd({4, 3}, DType::kBF16, 3);
    EXPECT_FALSE(euler_update(Context::cpu(), {}, a, b).ok()) << "shape mismatch";
    EXPECT_FALSE(euler_update(Context::cpu(), {}, h, h).ok()) << "bf16";
    EXPECT_FALSE(euler_update(Context::cpu(), {.sigma = 0.0f}, a, a).ok()) << "sigma 0";
}

// OCP e4m3fn rounding written independently of core/dtype: saturate at 448, 3 mantissa bits, subnormals
// below 2^-6, ties to even.
double naive_e4m3(double v) {
    if (std::isnan(v)) return v;
    const double a = std::min(std::fabs(v), 448.0);
    if (a == 0) return 0.0;
    const int e = std::max(static_cast<int>(std::floor(std::log2(a))), -6);
    const double quantum = std::ldexp(1.0, e - 3);
    const double q = std::nearbyint(a / quantum) * quantum; // default rounding mode: ties to even
    return std::copysign(std::min(q, 448.0), v);
}

TEST(Ops, Cast) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 300;
    const DType all[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3};
    for (auto [r, c] : kEltShapes)
        for (DType in : all)
            for (DType out : all) {
                SCOPED_TRACE("cast " + std::to_string(r) + "x" + std::to_string(c) + " " + name(in) + "->" +
                             name(out));
                // Past fp8's ±448 so saturation is exercised.
                Tensor x = rnd({r, c}, in, seed++, -600.0f, 600.0f);
                Tensor y0 = Tensor::host({r, c}, out);
                std::vector<double> want;
                if (on_cuda()) {
                    Tensor y = clone(y0);
                    ASSERT_OK(cast(Context::cpu(), x, y));
                    want = values(y);
                } else {
                    for (double v : values(x))
                        want.push_back(out == DType::kF8E4M3 ? naive_e4m3(v) : rnd_to(v, out));
                }
                Guarded y(y0);
                ASSERT_OK(cast(ctx(), dev(x), y.t));
                check_output(y, want, kExactTol.of(out));
            }
}

// ---- RoPE (naive helper shared with head_norm_rope) ------------------------------------------------------
void naive_rope(std::vector<double>& x, int64_t s, int64_t h, int64_t dh, int64_t rd, std::vector<double> cs,
                std::vector<double> sn, bool round_tables, DType xdt) {
    if (round_tables)
        for (size_t i = 0; i < cs.size(); ++i) cs[i] = rnd_to(cs[i], xdt), sn[i] = rnd_to(sn[i], xdt);
    const int64_t half = rd / 2;
    for (int64_t i = 0; i < s; ++i)
        for (int64_t hh = 0; hh < h; ++hh) {
            double* v = x.data() + (i * h + hh) * dh;
            const double* c = cs.data() + i * rd;
            const double* n = sn.data() + i * rd;
            for (int64_t j = 0; j < half; ++j) {
                const double a = v[j], b = v[j + half];
                if (round_tables) { // eager bf16: each product is rounded, then the sum
                    v[j] = rnd_to(rnd_to(a * c[j], xdt) - rnd_to(b * n[j], xdt), xdt);
                    v[j + half] = rnd_to(rnd_to(b * c[j + half], xdt) + rnd_to(a * n[j + half], xdt), xdt);
                } else {
                    v[j] = a * c[j] - b * n[j];
                    v[j + half] = b * c[j + half] + a * n[j + half];
                }
            }
        }
}

struct RopeCase {
    int64_t s, h, dh, rd;
    bool f32_tables, round_tables, pass_zero; // pass_zero: RopeParams::rotary_dim = 0 (=> cos.dim(1))
};
const RopeCase kRopeCases[] = {{1, 1, 2, 2, true, false, false},
                               {5, 3, 16, 16, false, false, true},
                               {7, 2, 24, 16, true, true, false},
                               {9, 4, 128, 64, true, false, false},
                               // the DiT's head (128, rotary 96) and the video VAE's (64, rotary 48): the
                               // register-only CUDA kernel, 4 (head dim 128) or 8 (64) rows per warp; row
                               // counts not a multiple of it leave the last warp partly empty, head counts
                               // not a multiple of it put two positions' cos/sin in one warp
                               {11, 3, 128, 96, true, true, false},
                               {5, 7, 64, 48, true, true, false},
                               {3, 5, 64, 64, true, false, true},
                               {41, 5, 64, 48, true, false, false},    // 205 rows (4 blocks): 5 in the last
                               {13, 32, 64, 48, false, true, false},   // the video VAE's 32 heads
                               {23, 7, 128, 96, false, false, false}}; // 161 rows: 1 in the last warp

TEST(Ops, Rope) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 400;
    for (const auto& c : kRopeCases)
        for (DType dt : kFloats) {
            SCOPED_TRACE("rope s=" + std::to_string(c.s) + " h=" + std::to_string(c.h) +
                         " dh=" + std::to_string(c.dh) + " rd=" + std::to_string(c.rd) + " " + name(dt));
            DType tdt = c.f32_tables ? DType::kF32 : dt;
            Tensor x0 = rnd({c.s, c.h, c.dh}, dt, seed++);
            Tensor cs = rnd({c.s, c.rd}, tdt, seed++, -1.0f, 1.0f),
                   sn = rnd({c.s, c.rd}, tdt, seed++, -1.0f, 1.0f);
            RopeParams p{.rotary_dim = c.pass_zero ? 0 : static_cast<int>(c.rd),
                         .round_tables = c.round_tables};
            std::vector<double> want;
            if (on_cuda()) {
                Tensor x = clone(x0);
                ASSERT_OK(rope(Context::cpu(), p, x, cs, sn));
                want = values(x);
            } else {
                want = values(x0);
                naive_rope(want, c.s, c.h, c.dh, c.rd, values(cs), values(sn), c.round_tables, dt);
            }
            Guarded x(x0);
            ASSERT_OK(rope(ctx(), p, x.t, dev(cs), dev(sn)));
            check_output(x, want, kPointTol.of(dt));
        }
}

// ---- rows ------------------------------------------------------------------------------------------------
TEST(Ops, GatherScatterRows) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 500;
    const int64_t shapes[][3] = {{1, 1, 1}, {10, 4, 7}, {50, 33, 129}}; // N table rows, M indices, D
    for (const auto& sh : shapes)
        for (DType in : kFloats)
            for (DType out : kFloats)
                for (DType it : {DType::kI32, DType::kI64}) {
                    const int64_t n = sh[0], m = sh[1], d = sh[2];
                    SCOPED_TRACE("rows n=" + std::to_string(n) + " m=" + std::to_string(m) + " d=" +
                                 std::to_string(d) + " " + name(in) + "->" + name(out) + " " + name(it));
                    // Distinct indices for scatter (a permutation prefix); gather may repeat rows.
                    std::vector<int64_t> perm(static_cast<size_t>(n));
                    for (int64_t i = 0; i < n; ++i) perm[i] = (i * 7 + 3) % n;
                    perm.resize(static_cast<size_t>(m));
                    Tensor gidx = indices(random_rows(m, n, seed++), it), sidx = indices(perm, it);
                    Tensor table = rnd({n, d}, in, seed++), src = rnd({m, d}, in, seed++);
                    Tensor g0 = Tensor::host({m, d}, out), s0 = rnd({n, d}, out, seed++);
                    std::vector<double> gwant, swant;
                    if (on_cuda()) {
                        Tensor g = clone(g0), s = clone(s0);
                        ASSERT_OK(gather_rows(Context::cpu(), table, gidx, g));
                        ASSERT_OK(scatter_rows(Context::cpu(), src, sidx, s));
                        gwant = values(g), swant = values(s);
                    } else {
                        auto tv = values(table), sv = values(src), gi = values(gidx);
                        for (int64_t i = 0; i < m; ++i)
                            for (int64_t j = 0; j < d; ++j)
                                gwant.push_back(rnd_to(tv[static_cast<int64_t>(gi[i]) * d + j], out));
                        swant = values(s0);
                        for (int64_t i = 0; i < m; ++i)
                            for (int64_t j = 0; j < d; ++j)
                                swant[perm[i] * d + j] = rnd_to(sv[i * d + j], out);
                    }
                    Guarded g(g0), s(s0);
                    ASSERT_OK(gather_rows(ctx(), dev(table), dev(gidx), g.t));
                    ASSERT_OK(scatter_rows(ctx(), dev(src), dev(sidx), s.t));
                    check_output(g, gwant, kExactTol.of(out));
                    check_output(s, swant, kExactTol.of(out));
                }
}

// ---- AdaLN + fused ---------------------------------------------------------------------------------------
struct AdaCase {
    int64_t s, d, t, pitch; // rows, cols, table rows, table row pitch (>= d)
    bool round_intermediate, f32_tables;
    DType idx;
};
const AdaCase kAdaCases[] = {{1, 1, 1, 1, false, false, DType::kI32},
                             {7, 33, 3, 40, true, true, DType::kI64},
                             {64, 96, 5, 288, false, true, DType::kI32},
                             {20, 130, 2, 390, true, false, DType::kI64}};

std::vector<double> naive_modulate(const std::vector<double>& x, int64_t s, int64_t d,
                                   const std::vector<double>& shift, int64_t shift_pitch,
                                   const std::vector<double>& scale, int64_t scale_pitch,
                                   const std::vector<double>& row, bool round_mid, DType out) {
    std::vector<double> y(x.size());
    for (int64_t r = 0; r < s; ++r) {
        const int64_t t = static_cast<int64_t>(row[r]);
        for (int64_t c = 0; c < d; ++c) {
            // bf16 emulation: eager PyTorch rounds (1 + scale), the product and the sum.
            double one_plus = 1.0 + scale[t * scale_pitch + c];
            if (round_mid) one_plus = rnd_to(one_plus, out);
            double v = x[r * d + c] * one_plus;
            if (round_mid) v = rnd_to(v, out);
            y[r * d + c] = v + shift[t * shift_pitch + c];
        }
    }
    return y;
}

// values() of a strided table view comes back densely packed: its pitch is cols.
TEST(Ops, ModulateGatedResidualFused) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 600;
    for (const auto& c : kAdaCases)
        for (DType dt : kFloats)
            for (DType out : {dt, DType::kF32}) {
                SCOPED_TRACE("adaln s=" + std::to_string(c.s) + " d=" + std::to_string(c.d) +
                             " t=" + std::to_string(c.t) + " pitch=" + std::to_string(c.pitch) + " " +
                             name(dt) + "->" + name(out) + (c.round_intermediate ? " round_mid" : ""));
                const DType tdt = c.f32_tables ? DType::kF32 : dt;
                Tensor x = rnd({c.s, c.d}, dt, seed++);
                Tensor shift = strided_table(c.t, c.d, c.pitch, tdt, seed++);
                Tensor scale = strided_table(c.t, c.d, c.pitch, tdt, seed++);
                Tensor gate = strided_table(c.t, c.d, c.pitch, tdt, seed++);
                Tensor w = rnd({c.d}, dt, seed++);
                Tensor row = indices(random_rows(c.s, c.t, seed++), c.idx);
                auto xv = values(x), shv = values(shift), scv = values(scale), gv = values(gate),
                     rv = values(row);
                Tensor y0 = Tensor::host({c.s, c.d}, out);
                {
                    SCOPED_TRACE("modulate");
                    ModulateParams p{.round_intermediate = c.round_intermediate};
                    std::vector<double> want;
                    if (on_cuda()) {
                        Tensor y = clone(y0);
                        ASSERT_OK(modulate(Context::cpu(), p, x, shift, scale, row, y));
                        want = values(y);
                    } else {
                        want =
                            naive_modulate(xv, c.s, c.d, shv, c.d, scv, c.d, rv, c.round_intermediate, out);
                    }
                    Guarded y(y0);
                    ASSERT_OK(modulate(ctx(), p, dev(x), dev_table(shift, c.pitch), dev_table(scale, c.pitch),
                                       dev(row), y.t));
                    check_output(y, want, kPointTol.of(out));
                }
                {
                    SCOPED_TRACE("gated_residual");
                    GatedResidualParams p{.round_intermediate = c.round_intermediate};
                    Tensor h0 = rnd({c.s, c.d}, out, seed++);
                    Tensor yin = rnd({c.s, c.d}, dt, seed++);
                    std::vector<double> want;
                    if (on_cuda()) {
                        Tensor h = clone(h0);
                        ASSERT_OK(gated_residual(Context::cpu(), p, h, gate, yin, row));
                        want = values(h);
                    } else {
                        want = values(h0);
                        auto yv = values(yin);
                        for (int64_t r = 0; r < c.s; ++r)
                            for (int64_t j = 0; j < c.d; ++j) {
                                double g = gv[static_cast<int64_t>(rv[r]) * c.d + j] * yv[r * c.d + j];
                                if (c.round_intermediate) g = rnd_to(g, out);
                                want[r * c.d + j] += g;
                            }
                    }
                    Guarded h(h0);
                    ASSERT_OK(gated_residual(ctx(), p, h.t, dev_table(gate, c.pitch), dev(yin), dev(row)));
                    check_output(h, want, kPointTol.of(out));
                }
                {
                    SCOPED_TRACE("rms_norm_modulate");
                    RmsNormParams np{.eps = 1e-5f, .round_normed = c.round_intermediate};
                    ModulateParams mp{.round_intermediate = c.round_intermediate};
                    std::vector<double> want;
                    if (on_cuda()) {
                        Tensor y = clone(y0);
                        ASSERT_OK(rms_norm_modulate(Context::cpu(), np, mp, x, w, shift, scale, row, y));
                        want = values(y);
                    } else {
                        // The normalized intermediate is held in x's dtype (see ops/cuda/cuda_ops.h).
                        auto wv = values(w);
                        auto n = naive_rms_norm(xv, c.s, c.d, &wv, np.eps, np.round_normed, dt);
                        for (double& v : n) v = rnd_to(v, dt);
                        want = naive_modulate(n, c.s, c.d, shv, c.d, scv, c.d, rv, c.round_intermediate, out);
                    }
                    Guarded y(y0);
                    ASSERT_OK(rms_norm_modulate(ctx(), np, mp, dev(x), dev(w), dev_table(shift, c.pitch),
                                                dev_table(scale, c.pitch), dev(row), y.t));
                    // Two roundings (intermediate in x's dtype, then y): allow twice the pointwise budget.
                    Tol t = kPointTol.of(dt == DType::kF32 ? out : dt);
                    check_output(y, want, {2 * t.atol, 2 * t.rtol});
                }
            }
}

TEST(Ops, HeadNormRope) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 700;
    for (const auto& c : kRopeCases)
        for (DType dt : kFloats)
            for (bool with_rope : {false, true}) {
                SCOPED_TRACE("head_norm_rope s=" + std::to_string(c.s) + " h=" + std::to_string(c.h) +
                             " dh=" + std::to_string(c.dh) + " " + name(dt) +
                             (with_rope ? " rope" : " norm only"));
                Tensor x0 = rnd({c.s, c.h, c.dh}, dt, seed++), w = rnd({c.dh}, dt, seed++);
                Tensor cs = with_rope ? rnd({c.s, c.rd}, DType::kF32, seed++, -1.0f, 1.0f) : Tensor();
                Tensor sn = with_rope ? rnd({c.s, c.rd}, DType::kF32, seed++, -1.0f, 1.0f) : Tensor();
                RmsNormParams np{.eps = 1e-5f, .round_normed = c.round_tables};
                RopeParams rp{.rotary_dim = static_cast<int>(c.rd), .round_tables = c.round_tables};
                std::vector<double> want;
                if (on_cuda()) {
                    Tensor x = clone(x0);
                    ASSERT_OK(head_norm_rope(Context::cpu(), np, rp, x, w, cs, sn));
                    want = values(x);
                } else {
                    auto wv = values(w);
                    want = naive_rms_norm(values(x0), c.s * c.h, c.dh, &wv, np.eps, np.round_normed, dt);
                    for (double& v : want) v = rnd_to(v, dt); // the norm is stored in x before RoPE
                    if (with_rope)
                        naive_rope(want, c.s, c.h, c.dh, c.rd, values(cs), values(sn), c.round_tables, dt);
                }
                Guarded x(x0);
                ASSERT_OK(head_norm_rope(ctx(), np, rp, x.t, dev(w), dev(cs), dev(sn)));
                Tol t = kPointTol.of(dt);
                check_output(x, want, {2 * t.atol, 2 * t.rtol});
            }
}

// gated_residual_rms_norm: on the CPU the fused op (out aliasing y or not) equals gated_residual followed by
// rms_norm bit for bit; the op on the backend is compared with the CPU's. The widths cover the CUDA kernel's
// 1, 2 and 4 chunks per thread, vectorized (d % 8 == 0, aligned) and not, and rows too wide to keep in
// registers (the two ops).
struct GatedNormCase {
    int64_t s, d, t, pitch; // rows, cols, gate table rows, table row pitch (>= d)
    bool round, weight;     // round_intermediate and round_normed; a norm weight
    DType idx;
};
const GatedNormCase kGatedNormCases[] = {{1, 1, 1, 1, false, true, DType::kI32},
                                         {37, 200, 3, 208, false, true, DType::kI32},
                                         {37, 2048, 1, 2048, false, true, DType::kI32}, // the video VAE's
                                         {5, 333, 2, 340, true, false, DType::kI64},   // scalar, 2 per thread
                                         {4, 1001, 3, 1001, true, true, DType::kI64},  // scalar, 4
                                         {3, 4096, 2, 4104, false, true, DType::kI32}, // vectorized, 2
                                         {2, 8000, 2, 8000, true, false, DType::kI64}, // vectorized, 4
                                         {2, 1500, 1, 1500, false, true, DType::kI32}}; // scalar, too wide

// The coarser of two float dtypes (the tolerance of a value rounded to both).
DType coarser(DType a, DType b) {
    if (a == DType::kBF16 || b == DType::kBF16) return DType::kBF16;
    return a == DType::kF16 || b == DType::kF16 ? DType::kF16 : DType::kF32;
}

bool same_values(const Tensor& a, const Tensor& b) {
    return values(a) == values(b);
}

TEST(Ops, GatedResidualRmsNorm) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 750;
    for (const auto& c : kGatedNormCases)
        for (DType hdt : {DType::kF32, DType::kBF16})
            for (DType ydt : {DType::kBF16, DType::kF32})
                for (bool alias : {true, false}) {
                    const DType odt = alias ? ydt : DType::kF16;
                    SCOPED_TRACE("gated_residual_rms_norm s=" + std::to_string(c.s) +
                                 " d=" + std::to_string(c.d) + " t=" + std::to_string(c.t) +
                                 " pitch=" + std::to_string(c.pitch) + " h " + name(hdt) + " y " + name(ydt) +
                                 " out " + (alias ? "= y" : name(odt)) + (c.round ? " round" : ""));
                    Tensor h0 = rnd({c.s, c.d}, hdt, seed++), yin = rnd({c.s, c.d}, ydt, seed++);
                    Tensor gate = strided_table(c.t, c.d, c.pitch, ydt, seed++);
                    Tensor w = c.weight ? rnd({c.d}, ydt, seed++) : Tensor();
                    Tensor row = indices(random_rows(c.s, c.t, seed++), c.idx);
                    Tensor out0 = alias ? yin : rnd({c.s, c.d}, odt, seed++);
                    const GatedResidualParams gp{.round_intermediate = c.round};
                    const RmsNormParams np{.eps = 1e-5f, .round_normed = c.round};
                    // the two ops
                    Tensor h_two = clone(h0), out_two = clone(out0);
                    ASSERT_OK(gated_residual(Context::cpu(), gp, h_two, gate, yin, row));
                    ASSERT_OK(rms_norm(Context::cpu(), np, h_two, w, out_two));
                    // the fused op on the CPU
                    Tensor h_cpu = clone(h0), y_cpu = clone(yin);
                    Tensor out_cpu = alias ? y_cpu : clone(out0);
                    ASSERT_OK(
                        gated_residual_rms_norm(Context::cpu(), gp, np, h_cpu, gate, y_cpu, row, w, out_cpu));
                    EXPECT_TRUE(same_values(h_cpu, h_two)) << "h differs from gated_residual's";
                    EXPECT_TRUE(same_values(out_cpu, out_two)) << "out differs from rms_norm's";
                    // the fused op on the backend (out aliasing y: y is the guarded output)
                    Guarded h(h0), out(out0);
                    const Tensor y = alias ? out.t : dev(yin);
                    ASSERT_OK(gated_residual_rms_norm(ctx(), gp, np, h.t, dev_table(gate, c.pitch), y,
                                                      dev(row), dev(w), out.t));
                    check_output(h, values(h_cpu), kPointTol.of(hdt));
                    // out is the norm of an h that may differ by its rounding: twice the coarser budget
                    const Tol t = kPointTol.of(coarser(hdt, odt));
                    check_output(out, values(out_cpu), {2 * t.atol, 2 * t.rtol});
                }
}

// A synchronous upload is finished when it returns: the next kernel runs on a non-blocking stream, which
// does not wait for the legacy stream a pageable cudaMemcpy lands on (Ops.Attention, f32 causal MQA, read a
// half-uploaded q about one run in ten on the H200). 64 MiB fresh uploads, each read at once by a cast.
TEST(Ops, UploadIsCompleteBeforeTheNextKernel) {
    SKIP_IF_NO_BACKEND();
    if (!on_cuda()) GTEST_SKIP() << "the CPU has no streams";
    const int64_t n = int64_t{16} << 20; // f32 elements
    Tensor x = Tensor::host({n}, DType::kF32);
    float* px = x.data_as<float>();
    for (int round = 0; round < 4; ++round) {
        for (int64_t i = 0; i < n; ++i) px[i] = static_cast<float>((i + round) % 251); // exact in bf16
        Tensor y0 = Tensor::host({n}, DType::kBF16);
        Guarded y(y0);
        ASSERT_OK(cast(ctx(), dev(x), y.t));
        Tensor got = y.host();
        const auto* pg = got.data_as<const uint16_t>();
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; ++i) {
            float f;
            const uint32_t bits = static_cast<uint32_t>(pg[i]) << 16;
            std::memcpy(&f, &bits, 4);
            if (f != px[i] && bad++ == 0) first = i;
        }
        EXPECT_EQ(bad, 0) << "round " << round << ": first stale element " << first;
    }
}

// download_chunked: a device tensor several chunks long (the last one partial) comes back byte for byte,
// after a kernel that wrote it on the stream; one-chunk and host tensors too. The second long one reuses the
// page-locked chunks the first one kept. The last one has the default 64 MiB chunks and a destination past
// kHugeHostBytes (allocated without a zero fill: every byte must come from the device).
TEST(Ops, DownloadChunked) {
    SKIP_IF_NO_BACKEND();
    const int64_t big = static_cast<int64_t>((size_t{150} << 20) / 4) + 3; // 150 MiB + 12 bytes: 3 chunks
    for (const int64_t n : {int64_t{1}, int64_t{1000}, int64_t{333333}, int64_t{250001}, big}) {
        SCOPED_TRACE("elements " + std::to_string(n));
        Tensor x = rnd({n}, DType::kF32, static_cast<uint32_t>(n));
        Tensor y0 = Tensor::host({n}, DType::kF32);
        Guarded y(y0);
        ASSERT_OK(scale(ctx(), 2.0f, dev(x), y.t)); // written by a kernel on the context's stream
        const size_t chunk = n == big ? size_t{64} << 20 : 40000;
        auto got = download_chunked(y.t, on_cuda() ? ctx().stream() : nullptr, chunk);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        ASSERT_TRUE(got->device().is_cpu());
        ASSERT_EQ(got->numel(), n);
        const float* px = x.data_as<const float>();
        const float* pg = got->data_as<const float>();
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) bad += pg[i] != 2.0f * px[i];
        EXPECT_EQ(bad, 0);
    }
}

// ---- attention -------------------------------------------------------------------------------------------
struct AttnCase {
    int64_t sq, sk, h, d;
    float scale;
    int64_t hkv = 0; // kv heads (0: = h)
    bool causal = false;
};
// Then grouped-query and/or causal (the text encoder's attention); causal needs sq == sk, and 70 rows
// cross the CUDA fallback's 32-key tiles and 4-query blocks unevenly. The next six have head dim 128 and
// sizes that are not multiples of the sm_90a kernel's 128-row tiles (partial query and key tiles, rows
// past Sq in the last tile, one query row, causal GQA / MQA over several tiles, non-causal GQA). The last
// six are head dim 64 (the video VAE decoder's; the sm_90a kernel's one-half tiles): one row, 77 rows (one
// partial tile), partial tiles on both sides with Sq != Sk, one query over 200 keys, GQA and MQA.
const AttnCase kAttnCases[] = {{1, 1, 1, 1, 0.0f},
                               {5, 7, 2, 16, 0.0f},
                               {33, 17, 3, 64, 0.3f},
                               {17, 70, 2, 128, 0.0f},
                               {5, 5, 4, 16, 0.0f, 2, true},
                               {33, 33, 4, 64, 0.0f, 4, true},
                               {17, 23, 6, 64, 0.0f, 3},
                               {70, 70, 8, 128, 0.2f, 2, true},
                               {1, 1, 4, 32, 0.0f, 1, true},
                               {300, 333, 3, 128, 0.0f},
                               {129, 129, 2, 128, 0.1f},
                               {1, 200, 2, 128, 0.0f},
                               {257, 257, 4, 128, 0.0f, 2, true},
                               {200, 200, 8, 128, 0.0f, 1, true},
                               {150, 190, 4, 128, 0.0f, 2},
                               {1, 1, 2, 64, 0.0f},
                               {77, 77, 4, 64, 0.0f},
                               {300, 333, 3, 64, 0.0f},
                               {1, 200, 2, 64, 0.25f},
                               {200, 200, 4, 64, 0.0f, 2},
                               {129, 257, 2, 64, 0.0f, 1}};

// True where the sm_90a attention kernel must take bf16 calls it covers (an sm_90a build on an H100/H200):
// there kHopper may not answer kUnimplemented for them.
bool hopper_expected() {
#ifdef H3_WITH_CUDA
    return on_cuda() && cuda_detail::hopper_kernels_usable(ctx());
#else
    return false;
#endif
}

// An output tensor of NaN: every element the op leaves unwritten fails the check.
Tensor nan_filled(const Shape& sh, DType t) {
    return host_tensor_from(std::vector<float>(static_cast<size_t>(sh.numel()), std::nanf("")), sh, t);
}

TEST(Ops, Attention) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 800;
    for (const auto& c : kAttnCases)
        for (DType dt : kFloats)
            for (DType out : {dt, DType::kF32}) {
                const int64_t hkv = c.hkv ? c.hkv : c.h, group = c.h / hkv;
                SCOPED_TRACE("attention sq=" + std::to_string(c.sq) + " sk=" + std::to_string(c.sk) +
                             " h=" + std::to_string(c.h) + " hkv=" + std::to_string(hkv) +
                             " d=" + std::to_string(c.d) + (c.causal ? " causal " : " ") + name(dt) + "->" +
                             name(out));
                Tensor q = rnd({c.sq, c.h, c.d}, dt, seed++, -1.0f, 1.0f);
                Tensor k = rnd({c.sk, hkv, c.d}, dt, seed++, -1.0f, 1.0f);
                Tensor v = rnd({c.sk, hkv, c.d}, dt, seed++);
                Tensor o0 = nan_filled(Shape{c.sq, c.h, c.d}, out);
                AttentionParams p{.scale = c.scale, .causal = c.causal};
                std::vector<double> want;
                if (on_cuda()) {
                    Tensor o = clone(o0);
                    ASSERT_OK(attention(Context::cpu(), p, q, k, v, o));
                    want = values(o);
                } else {
                    auto qv = values(q), kv = values(k), vv = values(v);
                    const double sc = c.scale > 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.d));
                    want.assign(static_cast<size_t>(c.sq * c.h * c.d), 0.0);
                    std::vector<double> s(static_cast<size_t>(c.sk));
                    for (int64_t i = 0; i < c.sq; ++i)
                        for (int64_t h = 0; h < c.h; ++h) {
                            const int64_t hk = h / group, nk = c.causal ? i + 1 : c.sk;
                            double mx = -1e300, sum = 0;
                            for (int64_t j = 0; j < nk; ++j) {
                                double dot = 0;
                                for (int64_t e = 0; e < c.d; ++e)
                                    dot += qv[(i * c.h + h) * c.d + e] * kv[(j * hkv + hk) * c.d + e];
                                s[j] = dot * sc, mx = std::max(mx, s[j]);
                            }
                            for (int64_t j = 0; j < nk; ++j) sum += (s[j] = std::exp(s[j] - mx));
                            for (int64_t j = 0; j < nk; ++j)
                                for (int64_t e = 0; e < c.d; ++e)
                                    want[(i * c.h + h) * c.d + e] +=
                                        s[j] / sum * vv[(j * hkv + hk) * c.d + e];
                        }
                }
                // Every CUDA implementation that takes the call (kAuto's choice first); the CPU has one.
                const AttentionImpl impls[] = {AttentionImpl::kAuto, AttentionImpl::kHopper,
                                               AttentionImpl::kCudnn, AttentionImpl::kFallback};
                for (AttentionImpl impl : impls) {
                    if (!on_cuda() && impl != AttentionImpl::kAuto) break;
                    SCOPED_TRACE("impl " + std::to_string(static_cast<int>(impl)));
                    Guarded o(o0);
                    p.impl = impl;
                    Status st = attention(ctx(), p, dev(q), dev(k), dev(v), o.t);
                    // Head dim 64 non-causal bf16 -> bf16 is the sm_90a kernel's on an H100/H200.
                    const bool must_run = impl == AttentionImpl::kHopper && hopper_expected() &&
                                          dt == DType::kBF16 && out == DType::kBF16 && c.d == 64 && !c.causal;
                    if (!must_run && impl != AttentionImpl::kAuto && st.code() == ErrorCode::kUnimplemented)
                        continue;
                    ASSERT_OK(st);
                    check_output(o, want, kAttnTol.of(out));
                }
            }
}

// Batched attention (the video VAE decoder's tiles in one call): each item equals a single-sequence call on
// its rows — bit for bit on the CPU (the same code per item); on CUDA (the sm_90a kernel for bf16 with head
// dim 64 or 128 in one launch, cuDNN's batched plan for f16/bf16 with head dim 64 or 128, else the items one
// by one), every implementation forced in turn, against the CPU reference within the attention tolerance.
// Sq != Sk, a causal case and an lse case run too (those take the per-item path on CUDA). The head dim 64
// cases have odd sizes (1, 77, 200, 333 rows: partial 128-row tiles in every item, items that start inside a
// tile of the flat rows) and one the decoder's tile length (1797, bf16 only: the CPU reference's cost).
TEST(Ops, AttentionBatch) {
    SKIP_IF_NO_BACKEND();
    struct Case {
        int64_t batch, sq, sk, h, d;
        bool causal, lse;
        bool bf16_only = false;
    };
    const Case cases[] = {{3, 37, 37, 4, 64, false, false},    {2, 20, 33, 2, 128, false, false},
                          {4, 129, 129, 2, 64, false, false},  {2, 17, 17, 2, 64, true, false},
                          {3, 9, 14, 2, 64, false, true},      {3, 1, 1, 2, 64, false, false},
                          {1, 77, 77, 4, 64, false, false},    {3, 77, 200, 2, 64, false, false},
                          {3, 333, 333, 2, 64, false, false},  {1, 200, 333, 2, 64, false, false},
                          {3, 200, 200, 2, 128, false, false}, {2, 1797, 1797, 1, 64, false, false, true}};
    uint32_t seed = 1900;
    for (const Case& c : cases)
        for (DType dt : kFloats) {
            if (c.bf16_only && dt != DType::kBF16) continue;
            SCOPED_TRACE("attention batch=" + std::to_string(c.batch) + " sq=" + std::to_string(c.sq) +
                         " sk=" + std::to_string(c.sk) + " h=" + std::to_string(c.h) +
                         " d=" + std::to_string(c.d) + (c.causal ? " causal" : "") + (c.lse ? " lse " : " ") +
                         name(dt));
            Tensor q = rnd({c.batch * c.sq, c.h, c.d}, dt, seed++, -1.0f, 1.0f);
            Tensor k = rnd({c.batch * c.sk, c.h, c.d}, dt, seed++, -1.0f, 1.0f);
            Tensor v = rnd({c.batch * c.sk, c.h, c.d}, dt, seed++);
            // The reference: one CPU call per item, written into one output.
            Tensor want_o = Tensor::host({c.batch * c.sq, c.h, c.d}, dt);
            Tensor want_lse = Tensor::host({c.batch * c.sq, c.h}, DType::kF32);
            for (int64_t b = 0; b < c.batch; ++b) {
                Tensor ob = want_o.slice(0, b * c.sq, (b + 1) * c.sq);
                Tensor lb = want_lse.slice(0, b * c.sq, (b + 1) * c.sq);
                AttentionParams one{.causal = c.causal, .lse = c.lse ? &lb : nullptr};
                ASSERT_OK(attention(Context::cpu(), one, q.slice(0, b * c.sq, (b + 1) * c.sq),
                                    k.slice(0, b * c.sk, (b + 1) * c.sk),
                                    v.slice(0, b * c.sk, (b + 1) * c.sk), ob));
            }
            // The outputs start as NaN: every element must be written. Every CUDA implementation that takes
            // the call (kAuto's choice first); the CPU has one.
            const std::vector<double> want = values(want_o);
            const Tensor dq = dev(q), dk = dev(k), dv = dev(v);
            for (AttentionImpl impl : {AttentionImpl::kAuto, AttentionImpl::kHopper, AttentionImpl::kCudnn,
                                       AttentionImpl::kFallback}) {
                if (!on_cuda() && impl != AttentionImpl::kAuto) break;
                SCOPED_TRACE("impl " + std::to_string(static_cast<int>(impl)));
                Guarded o(nan_filled(want_o.shape(), dt));
                Guarded lse(nan_filled(want_lse.shape(), DType::kF32));
                AttentionParams p{
                    .causal = c.causal, .impl = impl, .lse = c.lse ? &lse.t : nullptr, .batch = c.batch};
                const Status st = attention(ctx(), p, dq, dk, dv, o.t);
                // The sm_90a kernel must run bf16 head dim 64 (and non-causal 128) batches on an H100/H200.
                const bool must_run = impl == AttentionImpl::kHopper && hopper_expected() &&
                                      dt == DType::kBF16 && !c.causal && !c.lse;
                if (!must_run && impl != AttentionImpl::kAuto && st.code() == ErrorCode::kUnimplemented)
                    continue;
                ASSERT_OK(st);
                if (on_cuda()) {
                    check_output(o, want, kAttnTol.of(dt));
                    if (c.lse) check_output(lse, values(want_lse), {1e-4, 1e-5});
                } else {
                    check_output(o, want, {0.0, 0.0});
                    if (c.lse) check_output(lse, values(want_lse), {0.0, 0.0});
                }
            }
        }
    // batch must divide both row counts
    Tensor q = rnd({10, 2, 64}, DType::kF32, 1), k = rnd({9, 2, 64}, DType::kF32, 2);
    Tensor o = Tensor::host({10, 2, 64}, DType::kF32);
    const Status st = attention(Context::cpu(), {.batch = 2}, q, k, k, o);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("batch = 2"), std::string::npos) << st.to_string();
}

// Structured inputs for the sm_90a kernel at head dim 64 with a batch (its failures name the element, which
// points at the stage): q = 0 makes P uniform over the item's keys, so o = the item's mean of v checks P·V,
// the normalization and the item boundaries alone; v = identity (key j of each item carries 1 in channel
// j mod 64) makes o a sum of P columns, which checks the score GEMM and the softmax. 200 rows per item:
// partial query and key tiles in both items.
TEST(Ops, AttentionHead64Stages) {
    SKIP_IF_NO_BACKEND();
    if (!hopper_expected()) GTEST_SKIP() << "needs the sm_90a kernel (an sm_90a build on an H100/H200)";
    const int64_t s = 200, nb = 2, d = 64;
    Tensor qr = rnd({nb * s, 2, d}, DType::kBF16, 41, -1.7f, 1.7f),
           kr = rnd({nb * s, 2, d}, DType::kBF16, 42, -1.7f, 1.7f);
    Tensor vr = rnd({nb * s, 2, d}, DType::kBF16, 43);
    Tensor zero = Tensor::host({nb * s, 2, d}, DType::kBF16),
           eye = Tensor::host({nb * s, 2, d}, DType::kBF16);
    for (int64_t i = 0; i < nb * s * 2 * d; ++i) {
        const int64_t key = (i / (2 * d)) % s, ch = i % d;
        zero.data_as<uint16_t>()[i] = 0;
        eye.data_as<uint16_t>()[i] = f32_to_bf16(key % d == ch ? 1.0f : 0.0f);
    }
    struct Case {
        const char* what;
        Tensor q, k, v;
    } cases[] = {{"q = 0 (P uniform: P·V, normalization, item boundaries)", zero, kr, vr},
                 {"v = identity (o = sums of P: scores and softmax)", qr, kr, eye}};
    for (const Case& c : cases)
        for (int64_t batch : {int64_t{1}, nb}) { // batch 1: one sequence of 400 rows
            SCOPED_TRACE(std::string(c.what) + ", batch " + std::to_string(batch) +
                         " (element = (row·2 + head)·64 + channel)");
            AttentionParams p{.impl = AttentionImpl::kHopper, .batch = batch};
            Tensor ref = nan_filled(Shape{nb * s, 2, d}, DType::kBF16);
            ASSERT_OK(attention(Context::cpu(), p, c.q, c.k, c.v, ref));
            Guarded o(nan_filled(Shape{nb * s, 2, d}, DType::kBF16));
            ASSERT_OK(attention(ctx(), p, dev(c.q), dev(c.k), dev(c.v), o.t));
            check_output(o, values(ref), {1e-2, 8e-3});
        }
}

// ---- recorded work (ops/graph.h)
// ---------------------------------------------------------------------------- CUDA: a recording runs nothing
// until launched, each launch replays it on the recorded buffers, a call that cannot be recorded (a
// synchronization, an allocation, a nested recording) fails the recording cleanly and the stream works
// normally afterwards; the scratch's replacement moves the epoch. CPU: refused by name.
TEST(Ops, StreamGraphRecordsAndReplays) {
    SKIP_IF_NO_BACKEND();
    StreamGraph none;
    EXPECT_FALSE(none.defined());
    EXPECT_FALSE(none.launch(ctx()).ok());
    if (!on_cuda()) {
        EXPECT_FALSE(graphs_available(ctx()));
        EXPECT_FALSE(stream_recording(ctx()));
        auto r = StreamGraph::record(ctx(), [] { return ok_status(); });
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.status().message().find("CUDA context"), std::string::npos) << r.status().to_string();
        return;
    }
    Tensor xh = rnd({37, 65}, DType::kF32, 4100);
    Tensor zeros = Tensor::host({37, 65}, DType::kF32);
    std::memset(zeros.data(), 0, zeros.nbytes());
    Tensor x = dev(xh), y = dev(zeros);
    bool inside = false;
    auto rec = StreamGraph::record(ctx(), [&]() -> Status {
        inside = stream_recording(ctx());
        H3_TRY(axpby(ctx(), 2.0f, x, 1.0f, y, y)); // y += 2x
        return cast(ctx(), y, y);                  // a second kernel (f32 → f32 copy in place)
    });
    ASSERT_TRUE(rec.ok()) << rec.status().to_string();
    EXPECT_TRUE(inside);
    EXPECT_FALSE(stream_recording(ctx()));
    EXPECT_GE(rec->nodes(), 2u);
    ASSERT_OK(synchronize(ctx()));
    EXPECT_EQ(values(y), values(zeros)) << "recording ran the work";
    ASSERT_OK(rec->launch(ctx()));
    ASSERT_OK(rec->launch(ctx()));
    ASSERT_OK(synchronize(ctx()));
    std::vector<double> want = values(xh);
    for (double& v : want) v *= 4.0; // two launches of y += 2x, exact in f32
    EXPECT_EQ(values(y), want);
    // Moved recordings keep working; the moved-from one is empty.
    StreamGraph moved = std::move(*rec);
    EXPECT_FALSE(rec->defined());
    ASSERT_OK(moved.launch(ctx()));
    ASSERT_OK(synchronize(ctx()));
    // 4x + 2x: 6x needs one bit more than f32 holds; the kernel rounds the exact sum once, as the cast does
    for (double& v : want) v = static_cast<float>(v * 1.5);
    EXPECT_EQ(values(y), want);

    auto fails = [&](const std::function<Status()>& work, const char* what) {
        SCOPED_TRACE(what);
        auto r = StreamGraph::record(ctx(), work);
        EXPECT_FALSE(r.ok());
        EXPECT_FALSE(stream_recording(ctx()));
        // The stream runs unrecorded work again, with no error left behind.
        Tensor t = dev(zeros);
        EXPECT_TRUE(axpby(ctx(), 1.0f, x, 0.0f, t, t).ok());
        EXPECT_TRUE(synchronize(ctx()).ok());
        EXPECT_EQ(values(t), values(xh));
    };
    fails([&] { return synchronize(ctx()); }, "a synchronization");
    fails([&]() -> Status { return Tensor::empty({1 << 20}, DType::kF32, ctx().device).status(); },
          "an allocation");
    fails(
        [&]() -> Status {
            auto inner = StreamGraph::record(ctx(), [] { return ok_status(); });
            return inner.status();
        },
        "a nested recording");
    fails([] { return invalid_argument("the work's own error"); }, "the work's error");
#ifdef H3_WITH_CUDA
    const uint64_t e0 = graph_epoch(ctx());
    // Earlier tests may have grown the scratch already: ask for more than it holds now.
    ASSERT_TRUE(backend().holder->scratch(backend().holder->scratch_capacity() + 4096).ok());
    EXPECT_GT(graph_epoch(ctx()), e0) << "replacing the scratch must move the epoch";
    const uint64_t e1 = graph_epoch(ctx());
    ASSERT_TRUE(backend().holder->scratch(64).ok());
    EXPECT_EQ(graph_epoch(ctx()), e1) << "a request the scratch already holds must not replace it";
#endif
}

// ---- errors: bad shapes, dtypes and indices come back as Status, never a crash ---------------------------
void expect_error(const Status& s, const std::string& must_contain) {
    EXPECT_FALSE(s.ok()) << "expected an error containing '" << must_contain << "'";
    EXPECT_NE(s.message().find(must_contain), std::string::npos) << s.to_string();
}

TEST(OpsErrors, ShapesDtypesIndices) {
    const Context cpu = Context::cpu();
    Tensor x = rnd({4, 48}, DType::kBF16, 1), w = rnd({64, 32}, DType::kBF16, 2),
           y = Tensor::host({4, 64}, DType::kF32);
    expect_error(gemm(cpu, {}, x, w, Tensor(), y), "gemm: w is bf16[64, 32] but x has K = 48");
    Tensor w48 = rnd({64, 48}, DType::kF32, 3);
    expect_error(gemm(cpu, {}, x, w48, Tensor(), y), "must share a dtype");
    Tensor y_bad = Tensor::host({4, 63}, DType::kF32);
    expect_error(gemm(cpu, {}, x, rnd({64, 48}, DType::kBF16, 4), Tensor(), y_bad), "gemm: y is f32[4, 63]");
    expect_error(gemm(cpu, {}, x, rnd({64, 48}, DType::kBF16, 4), rnd({63}, DType::kBF16, 5), y), "bias");
    Tensor xi = Tensor::host({4, 48}, DType::kI32);
    expect_error(silu(cpu, xi, xi), "silu: x is i32[4, 48] but must be f32, bf16 or f16");
    expect_error(rms_norm(cpu, {}, x, rnd({47}, DType::kF32, 6), x), "rms_norm: weight");
    expect_error(swiglu(cpu, rnd({2, 5}, DType::kF32, 7), y), "even");
    expect_error(
        rope(cpu, {.rotary_dim = 5}, x, Tensor::host({4, 5}, DType::kF32), Tensor::host({4, 5}, DType::kF32)),
        "rope: x"); // x is rank 2
    Tensor x3 = rnd({4, 2, 8}, DType::kF32, 8), cs = Tensor::host({4, 6}, DType::kF32);
    expect_error(rope(cpu, {.rotary_dim = 10}, x3, cs, cs), "rotary_dim = 10");
    expect_error(rope(cpu, {.rotary_dim = 3}, x3, cs, cs), "rotary_dim = 3");

    // Index ranges: one past the end and negative, i32 and i64.
    Tensor table = rnd({3, 48}, DType::kBF16, 9), out = Tensor::host({4, 48}, DType::kBF16);
    expect_error(modulate(cpu, {}, x, table, table, indices({0, 1, 3, 0}, DType::kI32), out),
                 "modulate: row[2] = 3 is out of range [0, 3)");
    expect_error(modulate(cpu, {}, x, table, table.slice(0, 0, 2), indices({0, 1, 2, 0}, DType::kI64), out),
                 "row[2] = 2 is out of range [0, 2)");
    expect_error(gated_residual(cpu, {}, out, table, x, indices({0, -1, 0, 0}, DType::kI64)), "row[1] = -1");
    Tensor gathered = Tensor::host({2, 48}, DType::kF32);
    expect_error(gather_rows(cpu, table, indices({0, 5}, DType::kI32), gathered),
                 "gather_rows: index[1] = 5");
    expect_error(scatter_rows(cpu, rnd({2, 48}, DType::kF32, 10), indices({3, 0}, DType::kI64), table),
                 "scatter_rows: index[0] = 3");
    expect_error(modulate(cpu, {}, x, table, table, indices({0, 1, 2}, DType::kI32), out), "row");
    expect_error(modulate(cpu, {}, x, table, table, Tensor::host({4}, DType::kF32), out), "i32 or i64");
    expect_error(
        modulate(cpu, {}, x, rnd({3, 47}, DType::kBF16, 11), table, indices({0, 0, 0, 0}, DType::kI32), out),
        "modulate: shift");
    Tensor q = rnd({3, 2, 8}, DType::kF32, 13), k = rnd({5, 2, 4}, DType::kF32, 14);
    Tensor o = Tensor::host({3, 2, 8}, DType::kF32);
    expect_error(attention(cpu, {}, q, k, k, o), "head dims must match");
    Tensor k3 = rnd({5, 3, 8}, DType::kF32, 17); // 2 query heads over 3 kv heads
    expect_error(attention(cpu, {}, q, k3, k3, o), "multiple of k's heads");
    Tensor k2 = rnd({5, 2, 8}, DType::kF32, 18); // causal needs Sq == Sk
    expect_error(attention(cpu, {.causal = true}, q, k2, k2, o), "causal attention needs as many keys");
    expect_error(attention(cpu, {}, q, rnd({5, 2, 8}, DType::kBF16, 15), rnd({5, 2, 8}, DType::kBF16, 16), o),
                 "share a dtype");
    expect_error(head_norm_rope(cpu, {}, {}, q, Tensor(), cs, Tensor()), "pass both");
    // gated_residual_rms_norm: gated_residual's and rms_norm's checks under its own name, and out != h.
    Tensor hf = rnd({4, 48}, DType::kF32, 19);
    Tensor row0 = indices({0, 0, 0, 0}, DType::kI32);
    expect_error(gated_residual_rms_norm(cpu, {}, {}, hf, table, x, row0, rnd({47}, DType::kF32, 20), out),
                 "gated_residual_rms_norm: norm_weight is f32[47] but expected shape [48] (h's last dim)");
    expect_error(gated_residual_rms_norm(cpu, {}, {}, hf, table, x, indices({0, -1, 0, 0}, DType::kI64),
                                         Tensor(), out),
                 "gated_residual_rms_norm: row[1] = -1");
    expect_error(gated_residual_rms_norm(cpu, {}, {}, hf, table.slice(1, 0, 47), x, row0, Tensor(), out),
                 "gated_residual_rms_norm: gate");
    expect_error(gated_residual_rms_norm(cpu, {}, {}, hf, table, x, row0, Tensor(), y_bad),
                 "gated_residual_rms_norm: out is f32[4, 63]");
    expect_error(gated_residual_rms_norm(cpu, {}, {.eps = -1.0f}, hf, table, x, row0, Tensor(), out),
                 "gated_residual_rms_norm: eps");
    expect_error(gated_residual_rms_norm(cpu, {}, {}, hf, table, x, row0, Tensor(), hf), "must not alias h");
    expect_error(gemm(cpu, {}, Tensor(), w, Tensor(), y), "gemm: x is undefined");
#ifndef H3_WITH_CUDA
    Context fake{.device = Device::cuda(0), .cuda = nullptr};
    expect_error(silu(fake, x, x), "silu");
#endif
}

} // namespace
} // namespace h3::ops
