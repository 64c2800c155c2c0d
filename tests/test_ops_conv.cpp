// Op tests for the VAE ops (conv1d, conv_transpose1d, snake_beta, alias_free_snake_beta, clamp,
// layer_norm; conv3d and group_norm of the video encoder), in the pattern of tests/test_ops.cpp. Default
// (CPU): each CPU reference is compared with a naive double-precision loop written here. With `--backend
// cuda` (or H3_TEST_BACKEND=cuda) each op runs on cuda:0 and is compared with the CPU reference on the same
// inputs. Every case checks NaN/Inf and guard bytes.
//
// Tolerances (|got − want| <= atol + rtol·|want|): convolutions sum Cin·K ≤ 11·24 fp32 products of values
// ≤ 2 in magnitude, so fp32 vs double (or a different summation order) differs by ≲ 1e-5 absolute; the
// alias-free activation chains two 12-tap filters around a sin(), ≲ 1e-5; LayerNorm output rounding only.
// conv3d sums up to Cin·27 = 432 products (|x| ≤ 2, |w| ≤ 0.5): fp32 vs double ≲ 3e-5 absolute; group_norm
// is one fp32 multiply-add after double statistics (plus SiLU's expf), ≲ 1e-5.
#include "core/cuda_api.h"
#include "core/dtype.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "op_harness.h"
#include "ops/ops.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_context.h"
#endif

#include <gtest/gtest.h>

#include <algorithm>
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

constexpr Tol kConvTol{2e-5, 1e-5};
constexpr Tol kActTol{2e-5, 1e-5};

// Runs `op` on the backend and returns the guarded output; `want` comes from the CPU reference (CUDA mode)
// or the naive loop (CPU mode).
std::vector<double> want_from(bool cuda_mode, const std::function<Status(const Context&, Tensor&)>& op,
                              const Shape& shape, const std::vector<double>& naive) {
    if (!cuda_mode) return naive;
    Tensor y = Tensor::host(shape, DType::kF32);
    Status s = op(Context::cpu(), y);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return values(y);
}

// ---- conv1d ----------------------------------------------------------------------------------------------
struct ConvCase {
    int64_t b, cin, cout, len, k;
    int stride, padding, dilation, groups;
    bool bias;
};
const ConvCase kConvCases[] = {{1, 1, 1, 1, 1, 1, 0, 1, 1, false},   {2, 3, 5, 17, 3, 1, 1, 1, 1, true},
                               {1, 8, 8, 40, 7, 1, 9, 3, 1, true},   {2, 6, 4, 33, 11, 1, 25, 5, 1, false},
                               {1, 6, 6, 50, 12, 2, 0, 1, 6, false}, {1, 24, 12, 9, 5, 3, 2, 2, 3, true}};

std::vector<double> naive_conv1d(const ConvCase& c, int64_t lout, const std::vector<double>& x,
                                 const std::vector<double>& w, const std::vector<double>& bias) {
    const int64_t cig = c.cin / c.groups, cog = c.cout / c.groups;
    std::vector<double> y(static_cast<size_t>(c.b * c.cout * lout));
    for (int64_t b = 0; b < c.b; ++b)
        for (int64_t co = 0; co < c.cout; ++co)
            for (int64_t t = 0; t < lout; ++t) {
                double acc = c.bias ? bias[static_cast<size_t>(co)] : 0.0;
                const int64_t g = co / cog;
                for (int64_t ci = 0; ci < cig; ++ci)
                    for (int64_t k = 0; k < c.k; ++k) {
                        const int64_t s = t * c.stride - c.padding + k * c.dilation;
                        if (s < 0 || s >= c.len) continue;
                        acc += x[static_cast<size_t>((b * c.cin + g * cig + ci) * c.len + s)] *
                               w[static_cast<size_t>((co * cig + ci) * c.k + k)];
                    }
                y[static_cast<size_t>((b * c.cout + co) * lout + t)] = acc;
            }
    return y;
}

TEST(OpsConv, Conv1d) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 11;
    for (const auto& c : kConvCases) {
        SCOPED_TRACE("conv1d b" + std::to_string(c.b) + " cin" + std::to_string(c.cin) + " k" +
                     std::to_string(c.k) + " d" + std::to_string(c.dilation) + " g" +
                     std::to_string(c.groups));
        Conv1dParams p{.stride = c.stride, .padding = c.padding, .dilation = c.dilation, .groups = c.groups};
        const int64_t lout = conv1d_out_length(c.len, c.k, p);
        Tensor x = rnd(Shape{c.b, c.cin, c.len}, DType::kF32, seed++);
        Tensor w = rnd(Shape{c.cout, c.cin / c.groups, c.k}, DType::kF32, seed++, -0.5f, 0.5f);
        Tensor bias = c.bias ? rnd(Shape{c.cout}, DType::kF32, seed++) : Tensor();
        Shape ys{c.b, c.cout, lout};
        Guarded y(Tensor::host(ys, DType::kF32));
        ASSERT_OK(conv1d(ctx(), p, dev(x), dev(w), dev(bias), y.t));
        auto want = want_from(
            on_cuda(),
            [&](const Context& cx, Tensor& out) { return conv1d(cx, p, clone(x), clone(w), bias, out); }, ys,
            naive_conv1d(c, lout, values(x), values(w), c.bias ? values(bias) : std::vector<double>{}));
        check_output(y, want, kConvTol);
    }
}

// ---- conv_transpose1d ------------------------------------------------------------------------------------
struct ConvTCase {
    int64_t b, cin, cout, len, k;
    int stride, padding, groups;
    bool bias;
};
const ConvTCase kConvTCases[] = {{1, 1, 1, 1, 1, 1, 0, 1, false},
                                 {2, 8, 4, 7, 9, 5, 2, 1, true},
                                 {1, 4, 2, 13, 4, 2, 1, 1, true},
                                 {1, 6, 6, 20, 12, 2, 0, 6, false},
                                 {2, 6, 9, 5, 6, 3, 1, 3, true}};

TEST(OpsConv, ConvTranspose1d) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 101;
    for (const auto& c : kConvTCases) {
        SCOPED_TRACE("conv_transpose1d cin" + std::to_string(c.cin) + " k" + std::to_string(c.k) + " s" +
                     std::to_string(c.stride) + " g" + std::to_string(c.groups));
        ConvTranspose1dParams p{.stride = c.stride, .padding = c.padding, .groups = c.groups};
        const int64_t lout = conv_transpose1d_out_length(c.len, c.k, p);
        const int64_t cog = c.cout / c.groups, cig = c.cin / c.groups;
        Tensor x = rnd(Shape{c.b, c.cin, c.len}, DType::kF32, seed++);
        Tensor w = rnd(Shape{c.cin, cog, c.k}, DType::kF32, seed++, -0.5f, 0.5f);
        Tensor bias = c.bias ? rnd(Shape{c.cout}, DType::kF32, seed++) : Tensor();
        auto xv = values(x), wv = values(w);
        std::vector<double> naive(static_cast<size_t>(c.b * c.cout * lout), 0.0);
        for (int64_t b = 0; b < c.b; ++b)
            for (int64_t co = 0; co < c.cout; ++co)
                for (int64_t t = 0; t < lout; ++t)
                    naive[static_cast<size_t>((b * c.cout + co) * lout + t)] = c.bias ? bias.get({co}) : 0.0;
        for (int64_t b = 0; b < c.b; ++b)
            for (int64_t ci = 0; ci < c.cin; ++ci)
                for (int64_t l = 0; l < c.len; ++l)
                    for (int64_t ol = 0; ol < cog; ++ol)
                        for (int64_t k = 0; k < c.k; ++k) {
                            const int64_t t = l * c.stride + k - c.padding;
                            if (t < 0 || t >= lout) continue;
                            const int64_t co = (ci / cig) * cog + ol;
                            naive[static_cast<size_t>((b * c.cout + co) * lout + t)] +=
                                xv[static_cast<size_t>((b * c.cin + ci) * c.len + l)] *
                                wv[static_cast<size_t>((ci * cog + ol) * c.k + k)];
                        }
        Shape ys{c.b, c.cout, lout};
        Guarded y(Tensor::host(ys, DType::kF32));
        ASSERT_OK(conv_transpose1d(ctx(), p, dev(x), dev(w), dev(bias), y.t));
        auto want = want_from(
            on_cuda(),
            [&](const Context& cx, Tensor& out) {
                return conv_transpose1d(cx, p, clone(x), clone(w), bias, out);
            },
            ys, naive);
        check_output(y, want, kConvTol);
    }
}

// ---- SnakeBeta and the alias-free activation
// ---------------------------------------------------------------
double snake_ref(double v, double la, double lb) {
    const double s = std::sin(std::exp(la) * v);
    return v + 1.0 / (std::exp(lb) + 1e-9) * s * s;
}

TEST(OpsConv, SnakeBeta) {
    SKIP_IF_NO_BACKEND();
    Tensor x = rnd(Shape{2, 5, 37}, DType::kF32, 7, -3.0f, 3.0f);
    Tensor a = rnd(Shape{5}, DType::kF32, 8, -1.0f, 1.0f), b = rnd(Shape{5}, DType::kF32, 9, -1.0f, 1.0f);
    std::vector<double> naive;
    auto xv = values(x);
    for (size_t i = 0; i < xv.size(); ++i) {
        const int64_t ch = static_cast<int64_t>(i / 37) % 5;
        naive.push_back(snake_ref(xv[i], a.get({ch}), b.get({ch})));
    }
    Guarded y(Tensor::host(x.shape(), DType::kF32));
    ASSERT_OK(snake_beta(ctx(), dev(x), dev(a), dev(b), y.t));
    auto want = want_from(
        on_cuda(), [&](const Context& cx, Tensor& out) { return snake_beta(cx, clone(x), a, b, out); },
        x.shape(), naive);
    check_output(y, want, kActTol);
}

// DAC's Snake (the audio VAE encoder): alpha in linear space.
TEST(OpsConv, Snake) {
    SKIP_IF_NO_BACKEND();
    Tensor x = rnd(Shape{3, 4, 29}, DType::kF32, 17, -3.0f, 3.0f);
    Tensor a = rnd(Shape{4}, DType::kF32, 18, 0.2f, 2.0f);
    std::vector<double> naive;
    auto xv = values(x);
    for (size_t i = 0; i < xv.size(); ++i) {
        const double al = a.get({static_cast<int64_t>(i / 29) % 4});
        const double s = std::sin(al * xv[i]);
        naive.push_back(xv[i] + 1.0 / (al + 1e-9) * s * s);
    }
    Guarded y(Tensor::host(x.shape(), DType::kF32));
    ASSERT_OK(snake(ctx(), dev(x), dev(a), y.t));
    auto want = want_from(
        on_cuda(), [&](const Context& cx, Tensor& out) { return snake(cx, clone(x), a, out); }, x.shape(),
        naive);
    check_output(y, want, kActTol);
}

// Naive alias-free activation, written from its definition: explicit padded buffers, a transposed conv,
// crops, SnakeBeta, a strided conv.
std::vector<double> naive_alias_free(const std::vector<double>& x, int64_t rows, int64_t len, int64_t c,
                                     const std::vector<double>& fu, const std::vector<double>& fd,
                                     const Tensor& a, const Tensor& b, int r) {
    const int64_t k = static_cast<int64_t>(fu.size()), pad = k / r - 1;
    const int64_t pl = pad * r + (k - r) / 2, pr = pad * r + (k - r + 1) / 2;
    std::vector<double> out;
    for (int64_t row = 0; row < rows; ++row) {
        std::vector<double> xp;
        for (int64_t i = -pad; i < len + pad; ++i)
            xp.push_back(x[static_cast<size_t>(row * len + std::clamp<int64_t>(i, 0, len - 1))]);
        const int64_t n_up = (static_cast<int64_t>(xp.size()) - 1) * r + k;
        std::vector<double> up(static_cast<size_t>(n_up), 0.0);
        for (size_t i = 0; i < xp.size(); ++i)
            for (int64_t t = 0; t < k; ++t)
                up[static_cast<size_t>(static_cast<int64_t>(i) * r + t)] +=
                    r * xp[i] * fu[static_cast<size_t>(t)];
        std::vector<double> s(up.begin() + pl, up.end() - pr);
        for (double& v : s) v = snake_ref(v, a.get({row % c}), b.get({row % c}));
        std::vector<double> sp;
        const int64_t n = static_cast<int64_t>(s.size());
        for (int64_t i = -(k / 2 - 1); i < n + k / 2; ++i)
            sp.push_back(s[static_cast<size_t>(std::clamp<int64_t>(i, 0, n - 1))]);
        for (int64_t t = 0; t * r + k <= static_cast<int64_t>(sp.size()); ++t) {
            double acc = 0.0;
            for (int64_t j = 0; j < k; ++j)
                acc += fd[static_cast<size_t>(j)] * sp[static_cast<size_t>(t * r + j)];
            out.push_back(acc);
        }
    }
    return out;
}

TEST(OpsConv, AliasFreeSnakeBeta) {
    SKIP_IF_NO_BACKEND();
    struct Case {
        int64_t b, c, len, k;
        int r;
    };
    const Case cases[] = {{1, 1, 1, 12, 2}, {2, 3, 29, 12, 2}, {1, 4, 100, 8, 2}, {1, 2, 17, 12, 3}};
    uint32_t seed = 200;
    for (const auto& cs : cases) {
        SCOPED_TRACE("alias_free len " + std::to_string(cs.len) + " k " + std::to_string(cs.k) + " r " +
                     std::to_string(cs.r));
        Tensor x = rnd(Shape{cs.b, cs.c, cs.len}, DType::kF32, seed++, -2.0f, 2.0f);
        Tensor a = rnd(Shape{cs.c}, DType::kF32, seed++, -1.0f, 1.0f);
        Tensor b = rnd(Shape{cs.c}, DType::kF32, seed++, -1.0f, 1.0f);
        Tensor fu = rnd(Shape{cs.k}, DType::kF32, seed++, -0.3f, 0.5f);
        Tensor fd = rnd(Shape{cs.k}, DType::kF32, seed++, -0.3f, 0.5f);
        AliasFreeParams p{.ratio = cs.r};
        Guarded y(Tensor::host(x.shape(), DType::kF32));
        ASSERT_OK(alias_free_snake_beta(ctx(), p, dev(x), dev(a), dev(b), dev(fu), dev(fd), y.t));
        auto want = want_from(
            on_cuda(),
            [&](const Context& cx, Tensor& out) {
                return alias_free_snake_beta(cx, p, clone(x), a, b, fu, fd, out);
            },
            x.shape(),
            naive_alias_free(values(x), cs.b * cs.c, cs.len, cs.c, values(fu), values(fd), a, b, cs.r));
        check_output(y, want, kActTol);
    }
}

TEST(OpsConv, ClampScale) {
    SKIP_IF_NO_BACKEND();
    Tensor x = rnd(Shape{3, 2, 41}, DType::kF32, 300, -3.0f, 3.0f);
    std::vector<double> naive;
    for (double v : values(x)) naive.push_back(std::min(1.0, std::max(-1.0, v)));
    Guarded y(Tensor::host(x.shape(), DType::kF32));
    ASSERT_OK(clamp(ctx(), -1.0f, 1.0f, dev(x), y.t));
    check_output(y, naive, Tol{0, 0});
    std::vector<double> scaled;
    for (double v : values(x)) scaled.push_back(static_cast<double>(0.25f * static_cast<float>(v)));
    Guarded z(Tensor::host(x.shape(), DType::kF32));
    ASSERT_OK(scale(ctx(), 0.25f, dev(x), z.t));
    check_output(z, scaled, Tol{0, 0});
}

// ---- LayerNorm -------------------------------------------------------------------------------------------
TEST(OpsConv, LayerNorm) {
    SKIP_IF_NO_BACKEND();
    struct Case {
        int64_t r, d;
        bool affine;
    };
    const Case cases[] = {{1, 1, false}, {5, 64, true}, {17, 300, true}, {3, 2048, false}};
    const DType dts[] = {DType::kF32, DType::kBF16, DType::kF16};
    constexpr Tol tol[] = {{2e-5, 1e-5}, {1e-2, 8e-3}, {2e-3, 1e-3}};
    uint32_t seed = 400;
    for (const auto& c : cases)
        for (int di = 0; di < 3; ++di) {
            const DType dt = dts[di];
            SCOPED_TRACE("layer_norm " + std::to_string(c.r) + "x" + std::to_string(c.d) + " " +
                         dtype_name(dt));
            Tensor x = rnd(Shape{c.r, c.d}, dt, seed++, -3.0f, 3.0f);
            Tensor w = c.affine ? rnd(Shape{c.d}, DType::kF32, seed++) : Tensor();
            Tensor b = c.affine ? rnd(Shape{c.d}, DType::kF32, seed++) : Tensor();
            auto xv = values(x);
            std::vector<double> naive;
            for (int64_t r = 0; r < c.r; ++r) {
                double m = 0, v = 0;
                for (int64_t i = 0; i < c.d; ++i) m += xv[static_cast<size_t>(r * c.d + i)];
                m /= static_cast<double>(c.d);
                for (int64_t i = 0; i < c.d; ++i) v += std::pow(xv[static_cast<size_t>(r * c.d + i)] - m, 2);
                v /= static_cast<double>(c.d);
                for (int64_t i = 0; i < c.d; ++i) {
                    double n = (xv[static_cast<size_t>(r * c.d + i)] - m) / std::sqrt(v + 1e-5);
                    if (c.affine) n = n * w.get({i}) + b.get({i});
                    naive.push_back(static_cast<double>(dt == DType::kBF16 ? round_bf16(static_cast<float>(n))
                                                        : dt == DType::kF16 ? round_f16(static_cast<float>(n))
                                                                            : static_cast<float>(n)));
                }
            }
            Guarded y(Tensor::host(x.shape(), dt));
            ASSERT_OK(layer_norm(ctx(), LayerNormParams{}, dev(x), dev(w), dev(b), y.t));
            std::vector<double> want = naive;
            if (on_cuda()) {
                Tensor yc = Tensor::host(x.shape(), dt);
                ASSERT_OK(layer_norm(Context::cpu(), LayerNormParams{}, clone(x), w, b, yc));
                want = values(yc);
            }
            check_output(y, want, tol[di]);
        }
}

// ---- conv3d (causal temporal padding, reflect / zero / replicate spatial padding, strides) ---------------
struct Conv3dCase {
    int64_t b, cin, cout, t, h, w, kt, kh, kw;
    Conv3dParams p;
    bool bias;
};

int64_t pad_src(int64_t i, int64_t n, PadMode m) {
    if (i >= 0 && i < n) return i;
    if (m == PadMode::kZeros) return -1;
    if (m == PadMode::kReflect) return i < 0 ? -i : 2 * (n - 1) - i;
    return i < 0 ? 0 : n - 1;
}

// Written from the definition: build the padded input explicitly, then a plain strided convolution.
std::vector<double> naive_conv3d(const Conv3dCase& c, const Shape& ys, const std::vector<double>& x,
                                 const std::vector<double>& w, const std::vector<double>& bias) {
    const Conv3dParams& p = c.p;
    const int64_t tp = c.t + p.pad_front, hp = c.h + p.pad_top + p.pad_bottom,
                  wp = c.w + p.pad_left + p.pad_right;
    std::vector<double> xp(static_cast<size_t>(c.b * c.cin * tp * hp * wp), 0.0);
    for (int64_t b = 0; b < c.b; ++b)
        for (int64_t ci = 0; ci < c.cin; ++ci)
            for (int64_t f = p.pad_front; f < tp; ++f)
                for (int64_t yy = 0; yy < hp; ++yy)
                    for (int64_t xx = 0; xx < wp; ++xx) {
                        const int64_t sy = pad_src(yy - p.pad_top, c.h, p.spatial_mode);
                        const int64_t sx = pad_src(xx - p.pad_left, c.w, p.spatial_mode);
                        if (sy < 0 || sx < 0) continue;
                        xp[static_cast<size_t>((((b * c.cin + ci) * tp + f) * hp + yy) * wp + xx)] =
                            x[static_cast<size_t>(
                                (((b * c.cin + ci) * c.t + f - p.pad_front) * c.h + sy) * c.w + sx)];
                    }
    const int64_t to = ys[2], ho = ys[3], wo = ys[4];
    std::vector<double> y(static_cast<size_t>(ys.numel()));
    for (int64_t b = 0; b < c.b; ++b)
        for (int64_t co = 0; co < c.cout; ++co)
            for (int64_t f = 0; f < to; ++f)
                for (int64_t oy = 0; oy < ho; ++oy)
                    for (int64_t ox = 0; ox < wo; ++ox) {
                        double acc = c.bias ? bias[static_cast<size_t>(co)] : 0.0;
                        for (int64_t ci = 0; ci < c.cin; ++ci)
                            for (int64_t a = 0; a < c.kt; ++a)
                                for (int64_t dy = 0; dy < c.kh; ++dy)
                                    for (int64_t dx = 0; dx < c.kw; ++dx)
                                        acc += xp[static_cast<size_t>(
                                                   (((b * c.cin + ci) * tp + f * p.stride_t + a) * hp +
                                                    oy * p.stride_h + dy) *
                                                       wp +
                                                   ox * p.stride_w + dx)] *
                                               w[static_cast<size_t>(
                                                   (((co * c.cin + ci) * c.kt + a) * c.kh + dy) * c.kw + dx)];
                        y[static_cast<size_t>((((b * c.cout + co) * to + f) * ho + oy) * wo + ox)] = acc;
                    }
    return y;
}

constexpr Tol kConv3dTol{5e-5, 1e-5};

// ‖got − want‖₂ / ‖want‖₂
double rel_rms_error(const std::vector<double>& got, const std::vector<double>& want) {
    double se = 0, sw = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        se += (got[i] - want[i]) * (got[i] - want[i]);
        sw += want[i] * want[i];
    }
    return std::sqrt(se / std::max(sw, 1e-30));
}

TEST(OpsConv, Conv3d) {
    SKIP_IF_NO_BACKEND();
    const PadMode R = PadMode::kReflect, Z = PadMode::kZeros, P = PadMode::kReplicate;
    const Conv3dCase cases[] = {
        // conv_in of one frame: 3 → 8, causal pad 2, reflect 1 (only the last temporal tap sees data)
        {1,
         3,
         8,
         1,
         5,
         7,
         3,
         3,
         3,
         {.pad_front = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1, .spatial_mode = R},
         true},
        // a ResNet conv over several frames (Cin a multiple of 8: the aligned CUDA path)
        {2,
         8,
         16,
         5,
         6,
         6,
         3,
         3,
         3,
         {.pad_front = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1, .spatial_mode = R},
         true},
        // the downsampler: reflect right/bottom by 1, spatial and temporal stride 2
        {1,
         16,
         12,
         9,
         8,
         9,
         3,
         3,
         3,
         {.stride_t = 2,
          .stride_h = 2,
          .stride_w = 2,
          .pad_front = 2,
          .pad_bottom = 1,
          .pad_right = 1,
          .spatial_mode = R},
         true},
        // spatial stride only, one frame
        {2,
         8,
         8,
         1,
         7,
         6,
         3,
         3,
         3,
         {.stride_h = 2, .stride_w = 2, .pad_front = 2, .pad_bottom = 1, .pad_right = 1, .spatial_mode = R},
         false},
        // 1×1×1 shortcut / quant_conv
        {1, 8, 24, 3, 4, 4, 1, 1, 1, {}, true},
        // symmetric zero padding and no front frames: cuDNN pads by itself (nothing materialized)
        {2, 6, 10, 3, 9, 8, 3, 3, 3, {.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}, true},
        // zero and replicate padding, asymmetric pads, a 2-tap temporal kernel
        {1,
         5,
         7,
         4,
         5,
         3,
         3,
         3,
         3,
         {.pad_front = 1, .pad_top = 2, .pad_bottom = 1, .pad_right = 2, .spatial_mode = Z},
         true},
        {1,
         4,
         6,
         3,
         4,
         5,
         2,
         3,
         1,
         {.stride_w = 2, .pad_front = 1, .pad_top = 1, .pad_bottom = 3, .pad_left = 1, .spatial_mode = P},
         false},
        // several CUDA tiles in both Cout (200 > 128) and pixels (300 > 128)
        {1,
         16,
         200,
         2,
         20,
         15,
         3,
         3,
         3,
         {.pad_front = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1, .spatial_mode = R},
         true},
    };
    uint32_t seed = 500;
    int index = 0;
    for (const auto& c : cases) {
        SCOPED_TRACE("conv3d case " + std::to_string(index++));
        Tensor x = rnd(Shape{c.b, c.cin, c.t, c.h, c.w}, DType::kF32, seed++);
        Tensor w = rnd(Shape{c.cout, c.cin, c.kt, c.kh, c.kw}, DType::kF32, seed++, -0.5f, 0.5f);
        Tensor bias = c.bias ? rnd(Shape{c.cout}, DType::kF32, seed++) : Tensor();
        const Shape ys = conv3d_out_shape(x.shape(), w.shape(), c.p);
        ASSERT_EQ(ys.rank(), 5);
        auto want = want_from(
            on_cuda(),
            [&](const Context& cx, Tensor& out) { return conv3d(cx, c.p, clone(x), clone(w), bias, out); },
            ys, naive_conv3d(c, ys, values(x), values(w), c.bias ? values(bias) : std::vector<double>{}));
        // On CUDA every path: the default (fp16 tensor cores under allow_tf32, else the built-in kernels),
        // the built-in NCDHW kernels alone and cuDNN's convolution.
#ifdef H3_WITH_CUDA
        const Conv3dImpl initial = on_cuda() ? backend().holder->conv3d_impl() : Conv3dImpl::kAuto;
        const Conv3dImpl impls[] = {Conv3dImpl::kAuto, Conv3dImpl::kTf32, Conv3dImpl::kCudnn};
#endif
        for (int pass = 0; pass < (on_cuda() ? 3 : 1); ++pass) {
            std::string label = "cpu";
#ifdef H3_WITH_CUDA
            if (on_cuda()) {
                backend().holder->set_conv3d_impl(impls[pass]);
                label = conv3d_impl_name(impls[pass]);
            }
#endif
            SCOPED_TRACE(label);
            Guarded y(Tensor::host(ys, DType::kF32));
            ASSERT_OK(conv3d(ctx(), c.p, dev(x), dev(w), dev(bias), y.t));
            check_output(y, want, kConv3dTol);
            if (!on_cuda()) continue;
            // TF32 tensor cores or fp16 operands (ctx.allow_tf32): both operands rounded to 10-bit mantissas
            // (≤ 2^-11 relative each), fp32 sums of ≤ 432 products with |x·w| ≤ 1: ≲ 432 · 2^-10 ≈ 0.42 worst
            // case, ~0.02 typical; the bound below is the worst case, the RMS check the typical one.
            Context tf = ctx();
            tf.allow_tf32 = true;
            Guarded yt(Tensor::host(ys, DType::kF32));
            ASSERT_OK(conv3d(tf, c.p, dev(x), dev(w), dev(bias), yt.t));
            check_output(yt, want, Tol{0.45, 0.0});
            const double rel_rms = rel_rms_error(values(yt.host()), want);
            std::printf("[tf32 %s] conv3d case %d rel_rms %.3e\n", label.c_str(), index - 1, rel_rms);
            EXPECT_LT(rel_rms, 3e-3);
        }
#ifdef H3_WITH_CUDA
        if (on_cuda()) backend().holder->set_conv3d_impl(initial);
#endif
    }
}

// ---- conv3d on fp16 tensor cores (the CUDA default under allow_tf32) -------------------------------------
// Shapes that exercise the fp16 implicit GEMM's edges: Cin 8 / 16 / 64 / 128 (one partial or several
// 32-channel K steps per tap), Cin 3 / 5 / 12 (not multiples of 8: the fp16 copies carry zero channels up to
// 8 / 8 / 16; conv_in's 3 → C at a 19×21 frame, odd voxel count), Cout 8 / 48 / 128 / 200 (partial 128-row
// tiles), 13×11 = 143 voxels per frame (a partial 128-voxel tile, odd count: scalar stores), strides (1,2,2)
// and (2,2,2) with the downsampler's one-sided right/bottom pads, causal pad 2 with T = 1 and T = 5 (the tap
// skip; pad 4 with a 3-tap kernel leaves the first output frames with no tap at all: bias only), every
// padding mode, bias and none, B = 2; for the wgmma GEMM (Cin 64 / 128 / 192) 0 to 6 K steps per output
// frame (none, fewer than its 4 ring stages, one wrap) and 3 × 3 tiles of 128 × 256. CPU mode: the CPU
// reference against the naive loop, as TEST(OpsConv,
// Conv3d). CUDA mode: against the CPU reference (fp32), output poisoned with NaN first (every element must be
// written). Error model: each operand rounded to fp16 (≤ 2^-11 relative; |x| ≤ 2 and |w| ≤ 0.5 stay in fp16's
// normal range), products exact and summed in fp32. Per product the error is ~2^-11·|x·w| with random sign,
// rms |x·w| ≈ 1.15 · 0.29 ≈ 0.33, so over K = Cin·taps products the output error has σ ≈ 1e-4·√K (measured on
// the H200: max abs 2.2e-2 at K = 3456, rel-RMS 2.6e-4). Bounds: rel-RMS ≤ 2e-3 and max abs ≤ 8e-4·√K (≈ 8σ;
// 0.047 at K = 3456), far below what any indexing error (a wrong tap, channel or voxel: O(1)) produces.
struct Conv3dF16Case {
    Conv3dCase c;
    const char* what;
};

TEST(OpsConv, Conv3dF16) {
    SKIP_IF_NO_BACKEND();
    const PadMode R = PadMode::kReflect, Z = PadMode::kZeros, P = PadMode::kReplicate;
    const Conv3dParams same_r{
        .pad_front = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1, .spatial_mode = R};
    Conv3dParams same_z = same_r, same_p = same_r, front4_r = same_r;
    same_z.spatial_mode = Z;
    same_p.spatial_mode = P;
    front4_r.pad_front = 4; // a 3-tap kernel's first two output frames see only the causal zero frames
    const Conv3dParams down_hw{
        .stride_h = 2, .stride_w = 2, .pad_front = 2, .pad_bottom = 1, .pad_right = 1, .spatial_mode = R};
    const Conv3dParams down_thw{.stride_t = 2,
                                .stride_h = 2,
                                .stride_w = 2,
                                .pad_front = 2,
                                .pad_bottom = 1,
                                .pad_right = 1,
                                .spatial_mode = Z};
    const Conv3dF16Case cases[] = {
        {{1, 8, 8, 1, 13, 11, 3, 3, 3, same_r, true}, "Cin 8, one frame (two taps skipped)"},
        {{2, 16, 48, 5, 13, 11, 3, 3, 3, same_z, false}, "B 2, Cin 16, Cout 48, zeros"},
        {{1, 64, 200, 5, 13, 11, 3, 3, 3, same_p, true}, "Cout 200 (two M tiles), replicate"},
        {{1, 128, 128, 5, 13, 11, 3, 3, 3, same_r, true}, "128 → 128, four K steps per tap"},
        {{1, 128, 8, 2, 16, 24, 3, 3, 3, same_r, false}, "384 voxels (three full N tiles), Cout 8"},
        {{2, 16, 48, 5, 13, 11, 3, 3, 3, down_hw, true}, "stride (1,2,2), right/bottom pad"},
        {{1, 64, 128, 9, 13, 11, 3, 3, 3, down_thw, true}, "stride (2,2,2), zeros"},
        {{1, 16, 8, 1, 13, 11, 3, 3, 3, down_thw, false}, "stride (2,2,2), one frame"},
        {{1, 8, 16, 3, 7, 5, 3, 3, 3, {.pad_front = 4, .pad_top = 1, .pad_left = 2, .spatial_mode = P}, true},
         "front pad 4: output frames with no tap (bias only), one-sided pads"},
        {{1, 48, 40, 3, 5, 6, 1, 1, 1, {}, true}, "1×1×1, Cin 48 (a half 32-channel step)"},
        {{1,
          16,
          24,
          4,
          6,
          5,
          2,
          3,
          1,
          {.stride_w = 2, .pad_front = 1, .pad_top = 1, .pad_bottom = 3, .pad_left = 1, .spatial_mode = R},
          false},
         "2×3×1 kernel, asymmetric pads"},
        {{1, 3, 16, 5, 19, 21, 3, 3, 3, same_r, true}, "conv_in: Cin 3 (padded to 8), 3 → 16, reflect"},
        {{2, 3, 128, 5, 19, 21, 3, 3, 3, same_r, false}, "conv_in: B 2, Cin 3 → 128, no bias"},
        {{1, 5, 24, 5, 13, 11, 3, 3, 3, same_z, false}, "Cin 5 (padded to 8), zeros, no bias"},
        {{2, 5, 40, 5, 13, 11, 3, 3, 3, down_hw, true}, "Cin 5, stride (1,2,2), right/bottom pad"},
        {{1, 12, 130, 4, 13, 11, 3, 3, 3, same_p, true}, "Cin 12 (padded to 16), Cout 130, replicate"},
        {{1, 12, 8, 1, 9, 7, 3, 3, 3, same_r, false}, "Cin 12, one frame (two taps skipped), no bias"},
        // the wgmma GEMM (Cin a multiple of 64: 64-channel K runs; 128 × 256 tiles)
        {{1, 128, 64, 3, 24, 20, 3, 3, 3, same_r, true},
         "Cin 128, Cout 64 (partial M), 480 voxels (2 N tiles)"},
        {{2, 192, 128, 1, 17, 19, 3, 3, 3, same_z, false},
         "Cin 192 (three K runs), one frame, B 2, odd voxels"},
        {{1, 64, 136, 6, 16, 32, 3, 3, 3, down_thw, true}, "Cin 64, Cout 136 (two M tiles), stride (2,2,2)"},
        // few K steps per output frame (fewer steps than the ring's stages, a wrap, none at all) and several
        // M and N tiles
        {{1, 64, 64, 1, 12, 12, 3, 3, 3, same_r, true}, "Cin 64, one frame: 9 K steps (one temporal tap)"},
        {{1, 64, 72, 3, 9, 10, 3, 1, 1, {.pad_front = 2}, true}, "Cin 64, 3×1×1 causal: 1, 2, 3 K steps"},
        {{1, 128, 40, 4, 7, 9, 3, 1, 1, {.pad_front = 2}, false},
         "Cin 128, 3×1×1 causal: 2, 4, 6, 6 K steps"},
        {{1, 64, 24, 2, 6, 7, 3, 3, 3, front4_r, true},
         "Cin 64, front pad 4: two frames with no K step (bias only)"},
        {{1, 64, 264, 1, 20, 27, 3, 3, 3, same_z, true}, "Cin 64, Cout 264 × 540 voxels (3 × 3 tiles)"},
    };
#ifdef H3_WITH_CUDA
    const Conv3dImpl initial = on_cuda() ? backend().holder->conv3d_impl() : Conv3dImpl::kAuto;
    // Each case through both GEMMs of the fp16 path: mma.sync, and the Hopper wgmma one (where the build and
    // the device have sm_90a and Cin is a multiple of 64; other cases run mma.sync again).
    const Conv3dImpl gemms[] = {Conv3dImpl::kIgemm16, Conv3dImpl::kWgmma};
#endif
    uint32_t seed = 900;
    for (const auto& fc : cases) {
        const Conv3dCase& c = fc.c;
        SCOPED_TRACE(fc.what);
        Tensor x = rnd(Shape{c.b, c.cin, c.t, c.h, c.w}, DType::kF32, seed++);
        Tensor w = rnd(Shape{c.cout, c.cin, c.kt, c.kh, c.kw}, DType::kF32, seed++, -0.5f, 0.5f);
        Tensor bias = c.bias ? rnd(Shape{c.cout}, DType::kF32, seed++) : Tensor();
        const Shape ys = conv3d_out_shape(x.shape(), w.shape(), c.p);
        ASSERT_EQ(ys.rank(), 5);
        if (!on_cuda()) {
            Guarded y(Tensor::host(ys, DType::kF32));
            ASSERT_OK(conv3d(ctx(), c.p, x, w, bias, y.t));
            check_output(
                y, naive_conv3d(c, ys, values(x), values(w), c.bias ? values(bias) : std::vector<double>{}),
                kConv3dTol);
            continue;
        }
        Tensor ref = Tensor::host(ys, DType::kF32);
        ASSERT_OK(conv3d(Context::cpu(), c.p, clone(x), clone(w), bias, ref));
        const std::vector<double> want = values(ref);
        Tensor poison = Tensor::host(ys, DType::kF32);
        std::fill(poison.data_as<float>(), poison.data_as<float>() + poison.numel(),
                  std::numeric_limits<float>::quiet_NaN());
        Context tf = ctx();
        tf.allow_tf32 = true;
#ifdef H3_WITH_CUDA
        for (const Conv3dImpl gemm : gemms) {
            backend().holder->set_conv3d_impl(gemm);
            SCOPED_TRACE(conv3d_impl_name(gemm));
            Guarded y(poison);
            ASSERT_OK(conv3d(tf, c.p, dev(x), dev(w), dev(bias), y.t));
            const double k = static_cast<double>(c.cin * c.kt * c.kh * c.kw);
            check_output(y, want, Tol{8e-4 * std::sqrt(k), 0.0}); // also: no NaN left, guards intact
            const double rel_rms = rel_rms_error(values(y.host()), want);
            std::printf("[%s] %s: rel_rms %.3e\n", conv3d_impl_name(gemm), fc.what, rel_rms);
            EXPECT_LE(rel_rms, 2e-3);
        }
#endif
    }
#ifdef H3_WITH_CUDA
    if (on_cuda()) backend().holder->set_conv3d_impl(initial);
#endif
}

// ---- the tiled VAE's assembly: blend_tile and crossfade_frames
// ------------------------------------------------- Against naive loops in double written from the ops'
// formulas (the fp32 op differs by rounding only), and on CUDA against the CPU reference bit for bit. Odd
// tile sizes, blends longer than the kept part, and sizes where the CUDA side takes its 16-byte copy path.
TEST(OpsConv, BlendTile) {
    SKIP_IF_NO_BACKEND();
    struct Case {
        int64_t c, f, th, tw, height, width;
        BlendTileParams p;
        bool up, left;
    };
    const Case cases[] = {
        {3,
         2,
         5,
         7,
         9,
         11,
         {.out_y = 2, .out_x = 3, .keep_h = 4, .keep_w = 6, .blend_y = 3, .blend_x = 2},
         true,
         true},
        {1, 1, 5, 7, 5, 7, {.keep_h = 5, .keep_w = 7}, false, false},
        {2, 3, 6, 5, 8, 9, {.out_y = 1, .out_x = 4, .keep_h = 2, .keep_w = 5, .blend_y = 4}, true, false},
        {2,
         2,
         8,
         16,
         12,
         32,
         {.out_y = 4, .out_x = 8, .keep_h = 6, .keep_w = 12, .blend_y = 2, .blend_x = 4},
         true,
         true},
        {1, 2, 8, 16, 8, 32, {.out_x = 16, .keep_h = 8, .keep_w = 16, .blend_x = 5}, false, true},
    };
    uint32_t seed = 2100;
    for (const auto& cs : cases) {
        SCOPED_TRACE("tile " + std::to_string(cs.th) + "x" + std::to_string(cs.tw) + " blend " +
                     std::to_string(cs.p.blend_y) + "/" + std::to_string(cs.p.blend_x));
        Tensor cur = rnd(Shape{cs.c, cs.f, cs.th, cs.tw}, DType::kF32, seed++);
        Tensor up = cs.up ? rnd(Shape{cs.c, cs.f, cs.th + 1, cs.tw}, DType::kF32, seed++) : Tensor();
        Tensor left = cs.left ? rnd(Shape{cs.c, cs.f, cs.th, cs.tw + 2}, DType::kF32, seed++) : Tensor();
        Tensor init = rnd(Shape{cs.c, cs.f, cs.height, cs.width}, DType::kF32, seed++);
        const auto cv = values(cur), uv = cs.up ? values(up) : std::vector<double>{};
        const auto lv = cs.left ? values(left) : std::vector<double>{};
        std::vector<double> naive = values(init);
        const BlendTileParams& p = cs.p;
        const int64_t uh = cs.th + 1, lw = cs.tw + 2;
        for (int64_t pl = 0; pl < cs.c * cs.f; ++pl)
            for (int64_t r = 0; r < p.keep_h; ++r)
                for (int64_t c = 0; c < p.keep_w; ++c) {
                    double v = cv[static_cast<size_t>((pl * cs.th + r) * cs.tw + c)];
                    if (r < p.blend_y) {
                        const double wy = double(r) / double(p.blend_y);
                        v = uv[static_cast<size_t>((pl * uh + uh - p.blend_y + r) * cs.tw + c)] * (1 - wy) +
                            v * wy;
                    }
                    if (c < p.blend_x) {
                        const double wb = double(c) / double(p.blend_x);
                        v = lv[static_cast<size_t>((pl * cs.th + r) * lw + lw - p.blend_x + c)] * (1 - wb) +
                            v * wb;
                    }
                    naive[static_cast<size_t>((pl * cs.height + p.out_y + r) * cs.width + p.out_x + c)] = v;
                }
        Tensor ref = clone(init);
        ASSERT_OK(blend_tile(Context::cpu(), p, cur, up, left, ref));
        Guarded out(init);
        ASSERT_OK(blend_tile(ctx(), p, dev(cur), dev(up), dev(left), out.t));
        check_output(out, on_cuda() ? values(ref) : naive, on_cuda() ? Tol{0, 0} : Tol{1e-6, 1e-6});
    }
    Tensor cur = rnd(Shape{1, 1, 4, 4}, DType::kF32, 1), out = rnd(Shape{1, 1, 4, 4}, DType::kF32, 2);
    EXPECT_FALSE(blend_tile(Context::cpu(), {.out_y = 1, .keep_h = 4, .keep_w = 4}, cur, {}, {}, out).ok());
    EXPECT_FALSE(blend_tile(Context::cpu(), {.keep_h = 4, .keep_w = 4, .blend_y = 2}, cur, {}, {}, out).ok())
        << "blend_y without an upper tile";
}

TEST(OpsConv, CrossfadeFrames) {
    SKIP_IF_NO_BACKEND();
    struct Case {
        int64_t c, fs, fp, fo, h, w;
        CrossfadeParams p;
    };
    const Case cases[] = {
        {3, 9, 7, 12, 5, 3, {.frames = 6, .src_frame = 2, .out_frame = 3, .fade = 3, .prev_frame = 4}},
        {2, 5, 0, 5, 4, 4, {.frames = 5}},
        {3, 8, 8, 10, 8, 16, {.frames = 5, .src_frame = 3, .out_frame = 5, .fade = 4, .prev_frame = 1}},
        {1, 6, 6, 4, 3, 3, {.frames = 2, .src_frame = 1, .out_frame = 2, .fade = 5, .prev_frame = 0}}, // cut
                                                                                                       // ramp
    };
    uint32_t seed = 2200;
    for (const auto& cs : cases) {
        SCOPED_TRACE("crossfade " + std::to_string(cs.p.frames) + " fade " + std::to_string(cs.p.fade));
        Tensor src = rnd(Shape{cs.c, cs.fs, cs.h, cs.w}, DType::kF32, seed++);
        Tensor prev = cs.p.fade > 0 ? rnd(Shape{cs.c, cs.fp, cs.h, cs.w}, DType::kF32, seed++) : Tensor();
        Tensor init = rnd(Shape{cs.c, cs.fo, cs.h, cs.w}, DType::kF32, seed++);
        const auto sv = values(src), pv = prev.defined() ? values(prev) : std::vector<double>{};
        std::vector<double> naive = values(init);
        const int64_t hw = cs.h * cs.w;
        const CrossfadeParams& p = cs.p;
        for (int64_t c = 0; c < cs.c; ++c)
            for (int64_t k = 0; k < p.frames; ++k)
                for (int64_t i = 0; i < hw; ++i) {
                    double v = sv[static_cast<size_t>((c * cs.fs + p.src_frame + k) * hw + i)];
                    if (k < p.fade) {
                        const double wb = double(k) / double(p.fade);
                        v = pv[static_cast<size_t>((c * cs.fp + p.prev_frame + k) * hw + i)] * (1 - wb) +
                            v * wb;
                    }
                    naive[static_cast<size_t>((c * cs.fo + p.out_frame + k) * hw + i)] = v;
                }
        Tensor ref = clone(init);
        ASSERT_OK(crossfade_frames(Context::cpu(), p, src, prev, ref));
        Guarded out(init);
        ASSERT_OK(crossfade_frames(ctx(), p, dev(src), dev(prev), out.t));
        check_output(out, on_cuda() ? values(ref) : naive, on_cuda() ? Tol{0, 0} : Tol{1e-6, 1e-6});
    }
    Tensor src = rnd(Shape{1, 3, 2, 2}, DType::kF32, 1), out = rnd(Shape{1, 3, 2, 2}, DType::kF32, 2);
    EXPECT_FALSE(crossfade_frames(Context::cpu(), {.frames = 2, .src_frame = 2}, src, {}, out).ok());
    EXPECT_FALSE(crossfade_frames(Context::cpu(), {.frames = 2, .fade = 1}, src, {}, out).ok())
        << "fade, no prev";
}

// ---- group_norm per frame (+ SiLU) ------------------------------------------------------------------------
// The naive per-(batch, frame, group) moments of x [B, C, T, H, W] (values in NCDHW order), in double:
// {mean, biased variance} at index (b·T + f)·G + g.
std::vector<std::pair<double, double>> naive_group_moments(const std::vector<double>& xv, int64_t nb,
                                                           int64_t nc, int64_t nt, int64_t hw,
                                                           int64_t groups) {
    const int64_t cpg = nc / groups;
    std::vector<std::pair<double, double>> out(static_cast<size_t>(nb * nt * groups));
    for (int64_t b = 0; b < nb; ++b)
        for (int64_t f = 0; f < nt; ++f)
            for (int64_t g = 0; g < groups; ++g) {
                auto at = [&](int64_t ch, int64_t i) {
                    return static_cast<size_t>(((b * nc + ch) * nt + f) * hw + i);
                };
                double m = 0, v = 0;
                for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch)
                    for (int64_t i = 0; i < hw; ++i) m += xv[at(ch, i)];
                m /= static_cast<double>(cpg * hw);
                for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch)
                    for (int64_t i = 0; i < hw; ++i) v += std::pow(xv[at(ch, i)] - m, 2);
                out[static_cast<size_t>((b * nt + f) * groups + g)] = {m, v / static_cast<double>(cpg * hw)};
            }
    return out;
}

TEST(OpsConv, GroupNorm) {
    SKIP_IF_NO_BACKEND();
    struct Case {
        int64_t b, c, t, h, w;
        int groups;
        bool affine, silu;
    };
    const Case cases[] = {{2, 8, 3, 4, 5, 4, true, true},
                          {1, 6, 1, 7, 3, 3, false, false},
                          {1, 64, 2, 16, 16, 32, true, true},
                          {1, 4, 2, 1, 1, 2, true, false}};
    uint32_t seed = 600;
    for (const auto& c : cases) {
        SCOPED_TRACE("group_norm C" + std::to_string(c.c) + " G" + std::to_string(c.groups) +
                     (c.silu ? " silu" : ""));
        // an offset so that the mean matters
        Tensor x = rnd(Shape{c.b, c.c, c.t, c.h, c.w}, DType::kF32, seed++, -1.0f, 3.0f);
        Tensor w = c.affine ? rnd(Shape{c.c}, DType::kF32, seed++, 0.5f, 1.5f) : Tensor();
        Tensor bias = c.affine ? rnd(Shape{c.c}, DType::kF32, seed++, -0.5f, 0.5f) : Tensor();
        const GroupNormParams p{.groups = c.groups, .eps = 1e-6f, .silu = c.silu};
        auto xv = values(x);
        const int64_t hw = c.h * c.w, cpg = c.c / c.groups;
        std::vector<double> naive(xv.size());
        const auto moments = naive_group_moments(xv, c.b, c.c, c.t, hw, c.groups);
        for (int64_t b = 0; b < c.b; ++b)
            for (int64_t f = 0; f < c.t; ++f)
                for (int64_t g = 0; g < c.groups; ++g) {
                    auto at = [&](int64_t ch, int64_t i) {
                        return static_cast<size_t>(((b * c.c + ch) * c.t + f) * hw + i);
                    };
                    const auto [m, v] = moments[static_cast<size_t>((b * c.t + f) * c.groups + g)];
                    for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch)
                        for (int64_t i = 0; i < hw; ++i) {
                            double n = (xv[at(ch, i)] - m) / std::sqrt(v + 1e-6);
                            if (c.affine) n = n * w.get({ch}) + bias.get({ch});
                            if (c.silu) n = n / (1.0 + std::exp(-n));
                            naive[at(ch, i)] = n;
                        }
                }
        Guarded y(Tensor::host(x.shape(), DType::kF32));
        ASSERT_OK(group_norm(ctx(), p, dev(x), dev(w), dev(bias), y.t));
        auto want = want_from(
            on_cuda(),
            [&](const Context& cx, Tensor& out) { return group_norm(cx, p, clone(x), w, bias, out); },
            x.shape(), naive);
        check_output(y, want, Tol{1e-5, 1e-5});
        // in place gives the same
        Guarded z(x);
        ASSERT_OK(group_norm(ctx(), p, z.t, dev(w), dev(bias), z.t));
        check_output(z, want, Tol{1e-5, 1e-5});
    }
}

// ---- group_norm split in two: group_norm_stats + group_norm_apply -----------------------------------------
// CPU mode: the statistics against a naive double loop (scale = rstd·weight, shift = bias − mean·scale), and
// the composition against group_norm bit for bit (the encoder's CPU output must not change). CUDA mode: scale
// and shift against the CPU's (the one-pass CUDA statistics differ in rounding only: rtol 1e-5), and
// group_norm_apply over the CPU's scale / shift against the CPU's apply (one fp32 multiply-add each; SiLU's
// expf vs std::exp: ~1e-7 relative). A case with a large common offset (values ≈ 1000 ± 1) checks that the
// one-pass variance does not cancel. Outputs NaN-poisoned first.
TEST(OpsConv, GroupNormStatsApply) {
    SKIP_IF_NO_BACKEND();
    struct Case {
        int64_t b, c, t, h, w;
        int groups;
        bool affine, silu;
        float lo, hi;
    };
    const Case cases[] = {{2, 8, 3, 4, 5, 4, true, true, -1.0f, 3.0f},
                          {1, 6, 1, 7, 3, 3, false, false, -1.0f, 3.0f},
                          {1, 64, 2, 16, 16, 32, true, true, -1.0f, 3.0f},
                          {2, 12, 5, 6, 6, 4, true, true, 999.0f, 1001.0f},
                          {1, 4, 2, 1, 1, 2, true, false, -1.0f, 3.0f}};
    uint32_t seed = 1200;
    for (const auto& c : cases) {
        SCOPED_TRACE("group_norm_stats C" + std::to_string(c.c) + " G" + std::to_string(c.groups) + " T" +
                     std::to_string(c.t) + (c.silu ? " silu" : "") + " offset " + std::to_string(c.lo));
        Tensor x = rnd(Shape{c.b, c.c, c.t, c.h, c.w}, DType::kF32, seed++, c.lo, c.hi);
        Tensor w = c.affine ? rnd(Shape{c.c}, DType::kF32, seed++, 0.5f, 1.5f) : Tensor();
        Tensor bias = c.affine ? rnd(Shape{c.c}, DType::kF32, seed++, -0.5f, 0.5f) : Tensor();
        const GroupNormParams p{.groups = c.groups, .eps = 1e-6f, .silu = c.silu};
        const Shape as{c.b, c.t, c.c};
        auto nan_host = [](const Shape& s) {
            Tensor t = Tensor::host(s, DType::kF32);
            std::fill(t.data_as<float>(), t.data_as<float>() + t.numel(),
                      std::numeric_limits<float>::quiet_NaN());
            return t;
        };
        // the CPU reference's statistics and composition
        Tensor cs = Tensor::host(as, DType::kF32), ch = Tensor::host(as, DType::kF32);
        ASSERT_OK(group_norm_stats(Context::cpu(), p, clone(x), w, bias, cs, ch));
        Tensor composed = Tensor::host(x.shape(), DType::kF32), fused = Tensor::host(x.shape(), DType::kF32);
        ASSERT_OK(group_norm_apply(Context::cpu(), {.silu = c.silu}, clone(x), cs, ch, composed));
        ASSERT_OK(group_norm(Context::cpu(), p, clone(x), w, bias, fused));
        EXPECT_EQ(std::memcmp(composed.data(), fused.data(), composed.nbytes()), 0)
            << "CPU group_norm_stats + group_norm_apply must equal group_norm bit for bit";
        std::vector<double> want_scale, want_shift;
        if (on_cuda()) {
            want_scale = values(cs);
            want_shift = values(ch);
        } else {
            const int64_t cpg = c.c / c.groups;
            const auto moments = naive_group_moments(values(x), c.b, c.c, c.t, c.h * c.w, c.groups);
            want_scale.assign(static_cast<size_t>(as.numel()), 0.0);
            want_shift.assign(static_cast<size_t>(as.numel()), 0.0);
            for (int64_t b = 0; b < c.b; ++b)
                for (int64_t f = 0; f < c.t; ++f)
                    for (int64_t g = 0; g < c.groups; ++g) {
                        const auto [m, v] = moments[static_cast<size_t>((b * c.t + f) * c.groups + g)];
                        const double rstd = 1.0 / std::sqrt(v + 1e-6);
                        for (int64_t k = g * cpg; k < (g + 1) * cpg; ++k) {
                            const double a = rstd * (c.affine ? w.get({k}) : 1.0);
                            const size_t o = static_cast<size_t>((b * c.t + f) * c.c + k);
                            want_scale[o] = a;
                            want_shift[o] = (c.affine ? bias.get({k}) : 0.0) - m * a;
                        }
                    }
        }
        Guarded gs(nan_host(as)), gh(nan_host(as));
        ASSERT_OK(group_norm_stats(ctx(), p, dev(x), dev(w), dev(bias), gs.t, gh.t));
        check_output(gs, want_scale, Tol{1e-5, 1e-5});
        // shift = bias − mean·scale: at the 1000 offset it carries mean·scale's rounding (~1e3 · 1e-7)
        check_output(gh, want_shift, Tol{c.lo > 100.0f ? 5e-4 : 1e-5, 1e-5});
        // apply over the CPU's scale / shift (the same inputs on both sides)
        Guarded y(nan_host(x.shape()));
        ASSERT_OK(group_norm_apply(ctx(), {.silu = c.silu}, dev(x), dev(cs), dev(ch), y.t));
        check_output(y, values(composed), Tol{1e-6, 1e-6});
        // in place gives the same
        Guarded z(x);
        ASSERT_OK(group_norm_apply(ctx(), {.silu = c.silu}, z.t, dev(cs), dev(ch), z.t));
        check_output(z, values(composed), Tol{1e-6, 1e-6});
    }
}

// ---- conv3d with an input transform (GroupNorm + SiLU folded into the convolution's input) ---------------
// y = conv3d(silu?(x·scale[b, t, ci] + shift[b, t, ci])) with the padding applied after the transform. CPU
// mode: against the naive convolution of u computed in double (padding zeros of u, mirrored voxels of x
// transformed), and bit for bit against the unfused CPU composition group_norm_apply → conv3d. CUDA mode:
// every conv3d path (the default — fp16 tensor cores under allow_tf32, which fuse the transform into their
// conversion pass —, the built-in NCDHW kernels, cuDNN), with and without allow_tf32, against the unfused CPU
// composition; outputs NaN-poisoned first. |u| ≤ 2·1.5 + 0.5 = 3.5 (vs |x| ≤ 2 in Conv3d): the tolerances
// of Conv3d / Conv3dF16 scaled by ~2: exact fp32 paths 1e-4 absolute; 10-bit-mantissa paths max abs
// ≤ 1.6e-3·√K and rel-RMS ≤ 3e-3.
TEST(OpsConv, Conv3dInputTransform) {
    SKIP_IF_NO_BACKEND();
    const PadMode R = PadMode::kReflect, Z = PadMode::kZeros, P = PadMode::kReplicate;
    const Conv3dParams same_r{
        .pad_front = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1, .spatial_mode = R};
    Conv3dParams same_z = same_r, same_p = same_r;
    same_z.spatial_mode = Z;
    same_p.spatial_mode = P;
    const Conv3dParams down{.stride_t = 2,
                            .stride_h = 2,
                            .stride_w = 2,
                            .pad_front = 2,
                            .pad_bottom = 1,
                            .pad_right = 1,
                            .spatial_mode = R};
    struct Case {
        Conv3dCase c;
        bool silu;
        const char* what;
    };
    const Case cases[] = {
        {{1, 8, 16, 5, 7, 6, 3, 3, 3, same_r, true}, true, "reflect, causal pad 2, T 5"},
        {{2, 16, 24, 3, 6, 7, 3, 3, 3, same_z, false}, true, "zeros (padding = zeros of u), B 2"},
        {{1, 8, 8, 4, 5, 6, 3, 3, 3, same_p, true}, true, "replicate"},
        {{1, 5, 12, 1, 6, 5, 3, 3, 3, same_r, true}, true, "Cin 5, one frame (two taps skipped)"},
        {{2, 12, 20, 5, 9, 8, 3, 3, 3, down, true}, true, "Cin 12, B 2, stride (2,2,2), one-sided pads"},
        {{1, 16, 8, 3, 5, 5, 3, 3, 3, same_z, true}, false, "no SiLU (affine only)"},
        {{2, 8, 16, 2, 4, 4, 1, 1, 1, {}, true}, true, "1×1×1, no padding"},
        {{1, 64, 72, 3, 9, 11, 3, 3, 3, same_r, true}, true, "Cin 64 (the wgmma GEMM's K runs), reflect"},
        {{2, 128, 64, 2, 7, 6, 3, 3, 3, down, false}, true, "Cin 128, B 2, stride (2,2,2) (wgmma GEMM)"},
        {{1,
          6,
          10,
          4,
          5,
          7,
          2,
          3,
          3,
          {.pad_front = 3, .pad_top = 2, .pad_left = 1, .pad_right = 2, .spatial_mode = P},
          false},
         true,
         "front pad 3 with a 2-tap kernel (bias-free zero frames), asymmetric replicate"},
    };
    auto nan_host = [](const Shape& s) {
        Tensor t = Tensor::host(s, DType::kF32);
        std::fill(t.data_as<float>(), t.data_as<float>() + t.numel(),
                  std::numeric_limits<float>::quiet_NaN());
        return t;
    };
    uint32_t seed = 1300;
    for (const auto& tc : cases) {
        const Conv3dCase& c = tc.c;
        SCOPED_TRACE(tc.what);
        Tensor x = rnd(Shape{c.b, c.cin, c.t, c.h, c.w}, DType::kF32, seed++);
        Tensor w = rnd(Shape{c.cout, c.cin, c.kt, c.kh, c.kw}, DType::kF32, seed++, -0.5f, 0.5f);
        Tensor bias = c.bias ? rnd(Shape{c.cout}, DType::kF32, seed++) : Tensor();
        Tensor scale = rnd(Shape{c.b, c.t, c.cin}, DType::kF32, seed++, 0.5f, 1.5f);
        Tensor shift = rnd(Shape{c.b, c.t, c.cin}, DType::kF32, seed++, -0.5f, 0.5f);
        const Shape ys = conv3d_out_shape(x.shape(), w.shape(), c.p);
        ASSERT_EQ(ys.rank(), 5);
        // The unfused CPU composition.
        Tensor u = Tensor::host(x.shape(), DType::kF32), ref = Tensor::host(ys, DType::kF32);
        ASSERT_OK(group_norm_apply(Context::cpu(), {.silu = tc.silu}, clone(x), scale, shift, u));
        ASSERT_OK(conv3d(Context::cpu(), c.p, u, clone(w), bias, ref));
        Conv3dParams pt = c.p;
        if (!on_cuda()) {
            const Conv3dInputTransform in{.scale = scale, .shift = shift, .silu = tc.silu};
            pt.input = &in;
            Guarded y(nan_host(ys));
            ASSERT_OK(conv3d(ctx(), pt, x, w, bias, y.t));
            // the naive convolution of u in double
            const auto xv = values(x), sv = values(scale), hv = values(shift);
            std::vector<double> ud(xv.size());
            const int64_t hw = c.h * c.w;
            for (size_t i = 0; i < xv.size(); ++i) {
                const int64_t pl = static_cast<int64_t>(i) / hw, f = pl % c.t, ci = (pl / c.t) % c.cin,
                              b = pl / (c.t * c.cin);
                const size_t k = static_cast<size_t>((b * c.t + f) * c.cin + ci);
                const double v = xv[i] * sv[k] + hv[k];
                ud[i] = tc.silu ? v / (1.0 + std::exp(-v)) : v;
            }
            check_output(y, naive_conv3d(c, ys, ud, values(w), c.bias ? values(bias) : std::vector<double>{}),
                         Tol{1e-4, 1e-5});
            EXPECT_EQ(std::memcmp(y.host().data(), ref.data(), ref.nbytes()), 0)
                << "the CPU reference of the fused op must be the unfused composition, bit for bit";
            continue;
        }
        const std::vector<double> want = values(ref);
        const Conv3dInputTransform in{.scale = dev(scale), .shift = dev(shift), .silu = tc.silu};
        pt.input = &in;
        const double k = static_cast<double>(c.cin * c.kt * c.kh * c.kw);
#ifdef H3_WITH_CUDA
        const Conv3dImpl initial = backend().holder->conv3d_impl();
        const Conv3dImpl impls[] = {Conv3dImpl::kAuto, Conv3dImpl::kIgemm16, Conv3dImpl::kWgmma,
                                    Conv3dImpl::kTf32, Conv3dImpl::kCudnn};
        for (const Conv3dImpl impl : impls) {
            backend().holder->set_conv3d_impl(impl);
            for (const bool tf32 : {false, true}) {
                SCOPED_TRACE(std::string(conv3d_impl_name(impl)) + (tf32 ? " allow_tf32" : " fp32"));
                Context cx = ctx();
                cx.allow_tf32 = tf32;
                Guarded y(nan_host(ys));
                ASSERT_OK(conv3d(cx, pt, dev(x), dev(w), dev(bias), y.t));
                if (!tf32) {
                    check_output(y, want, Tol{1e-4, 1e-5});
                    continue;
                }
                check_output(y, want, Tol{1.6e-3 * std::sqrt(k), 0.0});
                const double rel_rms = rel_rms_error(values(y.host()), want);
                std::printf("[%s tf32] %s: rel_rms %.3e\n", conv3d_impl_name(impl), tc.what, rel_rms);
                EXPECT_LE(rel_rms, 3e-3);
            }
        }
        backend().holder->set_conv3d_impl(initial);
#endif
    }
}

// ---- conv3d's residual (Conv3dParams::residual: y = conv3d(x) + bias + residual)
// --------------------------- The fused call against the same path's convolution followed by ops::add, bit
// for bit (the sums are the same in the same order), on every CUDA path (the Hopper GEMM adds it in its
// epilogue, the others after), with and without an input transform; plus the errors: a residual of the wrong
// shape, aliasing y.
TEST(OpsConv, Conv3dResidual) {
    SKIP_IF_NO_BACKEND();
    const Conv3dParams same_r{.pad_front = 2,
                              .pad_top = 1,
                              .pad_bottom = 1,
                              .pad_left = 1,
                              .pad_right = 1,
                              .spatial_mode = PadMode::kReflect};
    Conv3dParams down = same_r;
    down.stride_t = down.stride_h = down.stride_w = 2;
    struct Case {
        Conv3dCase c;
        bool transform;
        const char* what;
    };
    const Case cases[] = {
        {{1, 8, 8, 3, 6, 7, 3, 3, 3, same_r, true}, false, "Cin 8 (mma.sync / TF32 paths)"},
        {{1, 128, 128, 3, 16, 20, 3, 3, 3, same_r, true}, true, "Cin 128 (the wgmma GEMM), input transform"},
        {{2, 64, 136, 2, 9, 11, 3, 3, 3, same_r, false},
         false,
         "Cin 64, Cout 136 (two M tiles), B 2, no bias"},
        {{1, 64, 64, 4, 8, 8, 3, 3, 3, down, true}, false, "stride (2,2,2)"},
    };
#ifdef H3_WITH_CUDA
    std::vector<Conv3dImpl> impls = {Conv3dImpl::kAuto};
    if (on_cuda())
        impls = {Conv3dImpl::kAuto, Conv3dImpl::kIgemm16, Conv3dImpl::kWgmma, Conv3dImpl::kTf32,
                 Conv3dImpl::kCudnn};
    const Conv3dImpl initial = on_cuda() ? backend().holder->conv3d_impl() : Conv3dImpl::kAuto;
#else
    const int impls[] = {0};
#endif
    uint32_t seed = 1700;
    for (const auto& tc : cases) {
        const Conv3dCase& c = tc.c;
        SCOPED_TRACE(tc.what);
        const Tensor x = dev(rnd(Shape{c.b, c.cin, c.t, c.h, c.w}, DType::kF32, seed++));
        const Tensor w = dev(rnd(Shape{c.cout, c.cin, c.kt, c.kh, c.kw}, DType::kF32, seed++, -0.5f, 0.5f));
        const Tensor bias = c.bias ? dev(rnd(Shape{c.cout}, DType::kF32, seed++)) : Tensor();
        const Tensor scale = dev(rnd(Shape{c.b, c.t, c.cin}, DType::kF32, seed++, 0.5f, 1.5f));
        const Tensor shift = dev(rnd(Shape{c.b, c.t, c.cin}, DType::kF32, seed++, -0.5f, 0.5f));
        const Conv3dInputTransform in{.scale = scale, .shift = shift, .silu = true};
        Conv3dParams p = c.p;
        if (tc.transform) p.input = &in;
        const Shape ys = conv3d_out_shape(x.shape(), w.shape(), p);
        ASSERT_EQ(ys.rank(), 5);
        const Tensor r = dev(rnd(ys, DType::kF32, seed++));
        for (const auto impl : impls) {
#ifdef H3_WITH_CUDA
            if (on_cuda()) backend().holder->set_conv3d_impl(impl);
            SCOPED_TRACE(conv3d_impl_name(impl));
#else
            (void)impl;
#endif
            for (const bool tf32 : {false, true}) {
                SCOPED_TRACE(tf32 ? "allow_tf32" : "fp32");
                Context cx = ctx();
                cx.allow_tf32 = tf32;
                Guarded unfused(Tensor::host(ys, DType::kF32));
                ASSERT_OK(conv3d(cx, p, x, w, bias, unfused.t));
                ASSERT_OK(add(cx, unfused.t, r, unfused.t));
                Conv3dParams pr = p;
                pr.residual = &r;
                Guarded fused(Tensor::host(ys, DType::kF32));
                ASSERT_OK(conv3d(cx, pr, x, w, bias, fused.t));
                EXPECT_TRUE(fused.guards_intact());
                const Tensor a = unfused.host(), b = fused.host();
                EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0)
                    << "conv3d with a residual must equal conv3d then add, bit for bit";
            }
        }
        // Errors: the wrong shape, and y itself as the residual.
        Conv3dParams bad = p;
        const Tensor wrong = dev(rnd(Shape{c.b, c.cout, ys[2], ys[3], ys[4] + 1}, DType::kF32, seed++));
        bad.residual = &wrong;
        Guarded y(Tensor::host(ys, DType::kF32));
        EXPECT_EQ(conv3d(ctx(), bad, x, w, bias, y.t).code(), ErrorCode::kInvalidArgument);
        bad.residual = &y.t;
        const Status alias = conv3d(ctx(), bad, x, w, bias, y.t);
        EXPECT_EQ(alias.code(), ErrorCode::kInvalidArgument);
        EXPECT_NE(alias.to_string().find("alias"), std::string::npos) << alias.to_string();
    }
#ifdef H3_WITH_CUDA
    if (on_cuda()) backend().holder->set_conv3d_impl(initial);
#endif
}

// ---- crop_tile: the tiled encoder's input tiles cut on the device -----------------------------------------
// A copy: against a naive loop exactly (CPU), against the CPU bit for bit (CUDA); widths and corners on and
// off the 16-byte grid (the CUDA float4 path and the scalar one). Output NaN-poisoned first.
TEST(OpsConv, CropTile) {
    SKIP_IF_NO_BACKEND();
    struct Case {
        int64_t c, f, h, w, y0, x0, th, tw;
    };
    const Case cases[] = {{3, 2, 10, 16, 2, 4, 5, 8},  // aligned: float4 copies
                          {3, 3, 9, 13, 1, 3, 7, 9},   // odd width and corner: scalar copies
                          {2, 1, 8, 12, 0, 0, 8, 12},  // the whole frame
                          {1, 4, 6, 20, 5, 16, 1, 4}}; // one row at the right edge
    uint32_t seed = 1400;
    for (const auto& c : cases) {
        SCOPED_TRACE("crop " + std::to_string(c.th) + "x" + std::to_string(c.tw) + " at (" +
                     std::to_string(c.y0) + ", " + std::to_string(c.x0) + ") of " + std::to_string(c.h) +
                     "x" + std::to_string(c.w));
        Tensor src = rnd(Shape{c.c, c.f, c.h, c.w}, DType::kF32, seed++);
        const auto sv = values(src);
        std::vector<double> want(static_cast<size_t>(c.c * c.f * c.th * c.tw));
        for (int64_t p = 0; p < c.c * c.f; ++p)
            for (int64_t r = 0; r < c.th; ++r)
                for (int64_t q = 0; q < c.tw; ++q)
                    want[static_cast<size_t>((p * c.th + r) * c.tw + q)] =
                        sv[static_cast<size_t>((p * c.h + c.y0 + r) * c.w + c.x0 + q)];
        Tensor init = Tensor::host(Shape{c.c, c.f, c.th, c.tw}, DType::kF32);
        std::fill(init.data_as<float>(), init.data_as<float>() + init.numel(),
                  std::numeric_limits<float>::quiet_NaN());
        Guarded y(init);
        ASSERT_OK(crop_tile(ctx(), {.y0 = c.y0, .x0 = c.x0}, dev(src), y.t));
        check_output(y, want, Tol{0.0, 0.0});
    }
    Tensor src = Tensor::host(Shape{1, 1, 4, 4}, DType::kF32),
           out = Tensor::host(Shape{1, 1, 2, 3}, DType::kF32);
    EXPECT_TRUE(crop_tile(Context::cpu(), {.y0 = 2, .x0 = 1}, src, out).ok());
    EXPECT_FALSE(crop_tile(Context::cpu(), {.y0 = 3, .x0 = 1}, src, out).ok()) << "the tile leaves src";
    EXPECT_FALSE(crop_tile(Context::cpu(), {.y0 = 0, .x0 = 2}, src, out).ok()) << "the tile leaves src";
    EXPECT_FALSE(crop_tile(Context::cpu(), {.y0 = -1, .x0 = 0}, src, out).ok());
    Tensor out_c = Tensor::host(Shape{2, 1, 2, 3}, DType::kF32);
    EXPECT_FALSE(crop_tile(Context::cpu(), {}, src, out_c).ok()) << "channel counts differ";
}

// ---- argument errors -------------------------------------------------------------------------------------
TEST(OpsConvErrors, ShapesAndDtypes) {
    Context cpu = Context::cpu();
    Tensor x = Tensor::host(Shape{1, 4, 10}, DType::kF32);
    Tensor w = Tensor::host(Shape{2, 4, 3}, DType::kF32);
    Tensor y = Tensor::host(Shape{1, 2, 8}, DType::kF32);
    EXPECT_TRUE(conv1d(cpu, {}, x, w, Tensor(), y).ok());
    Tensor y_bad = Tensor::host(Shape{1, 2, 9}, DType::kF32);
    EXPECT_FALSE(conv1d(cpu, {}, x, w, Tensor(), y_bad).ok());
    Tensor w_bf = Tensor::host(Shape{2, 4, 3}, DType::kBF16);
    EXPECT_FALSE(conv1d(cpu, {}, x, w_bf, Tensor(), y).ok());
    EXPECT_FALSE(conv1d(cpu, Conv1dParams{.groups = 3}, x, w, Tensor(), y).ok());
    Tensor wt = Tensor::host(Shape{4, 2, 4}, DType::kF32);
    Tensor yt = Tensor::host(Shape{1, 2, (10 - 1) * 2 + 4}, DType::kF32);
    EXPECT_TRUE(conv_transpose1d(cpu, ConvTranspose1dParams{.stride = 2}, x, wt, Tensor(), yt).ok());
    EXPECT_FALSE(conv_transpose1d(cpu, ConvTranspose1dParams{.stride = 1}, x, wt, Tensor(), yt).ok());
    Tensor a = Tensor::host(Shape{4}, DType::kF32), f = Tensor::host(Shape{12}, DType::kF32);
    Tensor f_odd = Tensor::host(Shape{11}, DType::kF32);
    Tensor ya = Tensor::host(Shape{1, 4, 10}, DType::kF32);
    EXPECT_TRUE(alias_free_snake_beta(cpu, {}, x, a, a, f, f, ya).ok());
    EXPECT_FALSE(alias_free_snake_beta(cpu, {}, x, a, a, f_odd, f_odd, ya).ok());
    EXPECT_FALSE(alias_free_snake_beta(cpu, {}, x, a, a, f, f, x).ok()) << "aliasing must be rejected";
    Tensor a3 = Tensor::host(Shape{3}, DType::kF32);
    EXPECT_FALSE(snake_beta(cpu, x, a3, a, ya).ok());
    Tensor ln_w = Tensor::host(Shape{9}, DType::kF32);
    Tensor x2 = Tensor::host(Shape{3, 10}, DType::kF32), y2 = Tensor::host(Shape{3, 10}, DType::kF32);
    EXPECT_TRUE(layer_norm(cpu, {}, x2, Tensor(), Tensor(), y2).ok());
    EXPECT_FALSE(layer_norm(cpu, {}, x2, ln_w, Tensor(), y2).ok());
    // conv3d / group_norm
    Tensor v = Tensor::host(Shape{1, 4, 1, 3, 3}, DType::kF32);
    Tensor k3 = Tensor::host(Shape{2, 4, 3, 3, 3}, DType::kF32);
    const Conv3dParams causal{.pad_front = 2,
                              .pad_top = 1,
                              .pad_bottom = 1,
                              .pad_left = 1,
                              .pad_right = 1,
                              .spatial_mode = PadMode::kReflect};
    Tensor vy = Tensor::host(Shape{1, 2, 1, 3, 3}, DType::kF32);
    EXPECT_TRUE(conv3d(cpu, causal, v, k3, Tensor(), vy).ok());
    Tensor vy_bad = Tensor::host(Shape{1, 2, 2, 3, 3}, DType::kF32);
    EXPECT_FALSE(conv3d(cpu, causal, v, k3, Tensor(), vy_bad).ok());
    Tensor k3_bf = Tensor::host(Shape{2, 4, 3, 3, 3}, DType::kBF16);
    EXPECT_FALSE(conv3d(cpu, causal, v, k3_bf, Tensor(), vy).ok());
    Conv3dParams wide = causal;
    wide.pad_left = 3; // reflect padding must be smaller than the frame
    Tensor vy_wide = Tensor::host(Shape{1, 2, 1, 3, 5}, DType::kF32);
    EXPECT_FALSE(conv3d(cpu, wide, v, k3, Tensor(), vy_wide).ok());
    Tensor k3_cin = Tensor::host(Shape{2, 5, 3, 3, 3}, DType::kF32);
    EXPECT_FALSE(conv3d(cpu, causal, v, k3_cin, Tensor(), vy).ok());
    Tensor gy = Tensor::host(v.shape(), DType::kF32);
    EXPECT_TRUE(group_norm(cpu, {.groups = 2}, v, Tensor(), Tensor(), gy).ok());
    EXPECT_FALSE(group_norm(cpu, {.groups = 3}, v, Tensor(), Tensor(), gy).ok());
    EXPECT_FALSE(group_norm(cpu, {.groups = 2}, v, Tensor::host(Shape{3}, DType::kF32), Tensor(), gy).ok());
    // group_norm_stats / group_norm_apply: scale and shift are [B, T, C]
    Tensor sc = Tensor::host(Shape{1, 1, 4}, DType::kF32), sh = Tensor::host(Shape{1, 1, 4}, DType::kF32);
    Tensor sc_bad = Tensor::host(Shape{1, 4, 1}, DType::kF32);
    EXPECT_TRUE(group_norm_stats(cpu, {.groups = 2}, v, Tensor(), Tensor(), sc, sh).ok());
    EXPECT_FALSE(group_norm_stats(cpu, {.groups = 3}, v, Tensor(), Tensor(), sc, sh).ok());
    EXPECT_FALSE(group_norm_stats(cpu, {.groups = 2}, v, Tensor(), Tensor(), sc_bad, sh).ok());
    EXPECT_FALSE(group_norm_stats(cpu, {.groups = 2}, v, Tensor(), Tensor(), sc, sc).ok()) << "scale = shift";
    EXPECT_TRUE(group_norm_apply(cpu, {.silu = true}, v, sc, sh, gy).ok());
    EXPECT_FALSE(group_norm_apply(cpu, {}, v, sc_bad, sh, gy).ok());
    // conv3d's input transform: both of scale and shift, [B, T, Cin]
    Conv3dInputTransform in{.scale = sc, .shift = sh, .silu = true};
    Conv3dParams with_input = causal;
    with_input.input = &in;
    EXPECT_TRUE(conv3d(cpu, with_input, v, k3, Tensor(), vy).ok());
    in.shift = Tensor();
    EXPECT_FALSE(conv3d(cpu, with_input, v, k3, Tensor(), vy).ok()) << "scale without shift";
    in = {.scale = sc_bad, .shift = sh, .silu = false};
    EXPECT_FALSE(conv3d(cpu, with_input, v, k3, Tensor(), vy).ok()) << "scale of the wrong shape";
}

} // namespace
} // namespace h3::ops
