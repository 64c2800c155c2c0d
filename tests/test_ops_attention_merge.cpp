// Op tests for attention's log-sum-exp output and attention_merge (ring attention's partials, issues #17,
// #46: the sm_90a bf16 and e4m3 kernels return it too), in
// the pattern of tests/test_ops.cpp. Default (CPU): each op against a naive double-precision loop written
// here. With `--backend cuda` (or H3_TEST_BACKEND=cuda): on cuda:0 against the same double loop (the CPU
// reference is itself within these tolerances of it). The property ring attention rests on: attention over
// a key range equals the merge of attention over its two halves — incl. an empty half (lse = −inf, its o
// never read) and rows whose every key is excluded (both halves −inf: o = 0, lse = −inf).
#include "op_harness.h"
#include "ops/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace h3::ops {
namespace {

using namespace harness;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
const DType kODtypes[] = {DType::kF32, DType::kBF16};
// Outputs are convex mixes of v (|v| ≤ 2) after ≤ 70 exp-weighted fp32 dot products of D ≤ 128.
constexpr TolTable kAttnTol{{2e-5, 1e-4}, {1e-2, 8e-3}, {2e-3, 1e-3}};
// lse: a log of a sum of ≤ 70 exps of fp32 scores: absolute error of a few fp32 ulps of the scores.
constexpr Tol kLseTol{2e-5, 2e-6};
// The sm_90a kernels' lse: fp32 scores from the tensor cores (bf16 products, fp32 sums), the scale folded in
// as scale·log2 e, ex2.approx per key (2 ulp), hundreds of keys: a few 1e-6 relative to the scores.
constexpr Tol kHopperLseTol{2e-4, 1e-5};

// Exact attention over keys [k0, k1) of q [Sq,H,D], k/v [Sk,H,D] in double: o [Sq,H,D] and lse [Sq,H].
struct Exact {
    std::vector<double> o, lse;
};
Exact exact_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t k0, int64_t k1,
                      double scale) {
    const int64_t sq = q.dim(0), h = q.dim(1), d = q.dim(2);
    const auto qv = values(q), kv = values(k), vv = values(v);
    Exact e{std::vector<double>(static_cast<size_t>(sq * h * d), 0.0),
            std::vector<double>(static_cast<size_t>(sq * h), kNegInf)};
    std::vector<double> s(static_cast<size_t>(k1 - k0));
    for (int64_t i = 0; i < sq; ++i)
        for (int64_t hh = 0; hh < h; ++hh) {
            if (k1 <= k0) continue;
            double mx = kNegInf, sum = 0;
            for (int64_t j = k0; j < k1; ++j) {
                double dot = 0;
                for (int64_t c = 0; c < d; ++c) dot += qv[(i * h + hh) * d + c] * kv[(j * h + hh) * d + c];
                s[j - k0] = dot * scale, mx = std::max(mx, s[j - k0]);
            }
            for (int64_t j = k0; j < k1; ++j) sum += (s[j - k0] = std::exp(s[j - k0] - mx));
            for (int64_t j = k0; j < k1; ++j)
                for (int64_t c = 0; c < d; ++c)
                    e.o[(i * h + hh) * d + c] += s[j - k0] / sum * vv[(j * h + hh) * d + c];
            e.lse[i * h + hh] = mx + std::log(sum);
        }
    return e;
}

// lse values with −inf kept exact (the general check would call them non-finite).
void check_lse(const Guarded& got_t, const std::vector<double>& want, Tol tol) {
    EXPECT_TRUE(got_t.guards_intact()) << "the op wrote outside lse";
    const std::vector<double> got = values(got_t.host());
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const bool ok = want[i] == kNegInf
                            ? got[i] == kNegInf
                            : std::isfinite(got[i]) &&
                                  std::fabs(got[i] - want[i]) <= tol.atol + tol.rtol * std::fabs(want[i]);
        if (!ok && bad++ < 5) ADD_FAILURE() << "lse[" << i << "] got " << got[i] << " want " << want[i];
    }
    EXPECT_EQ(bad, 0) << bad << " of " << got.size() << " lse values off";
}

Tensor lse_tensor(const std::vector<double>& v, const Shape& s) {
    std::vector<float> f(v.begin(), v.end());
    return host_tensor_from(f, s, DType::kF32);
}

struct SplitCase {
    int64_t sq, sk, h, d, split; // keys [0, split) and [split, sk)
};
// Uneven splits crossing the CUDA fallback's 32-key tiles and 4-query blocks; a one-key half; D = 128.
const SplitCase kSplits[] = {{5, 7, 2, 16, 3}, {33, 70, 3, 64, 33}, {17, 40, 2, 128, 1}, {9, 64, 4, 32, 32}};

TEST(OpsAttentionMerge, LseOfAttention) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 1;
    for (const auto& c : kSplits)
        for (DType dt : kODtypes) {
            SCOPED_TRACE("lse sq=" + std::to_string(c.sq) + " sk=" + std::to_string(c.sk) + " " +
                         dtype_name(dt));
            Tensor q = rnd({c.sq, c.h, c.d}, dt, seed++, -1.0f, 1.0f);
            Tensor k = rnd({c.sk, c.h, c.d}, dt, seed++, -1.0f, 1.0f);
            Tensor v = rnd({c.sk, c.h, c.d}, dt, seed++);
            const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
            const Exact want = exact_attention(q, k, v, 0, c.sk, scale);
            const AttentionImpl impls[] = {AttentionImpl::kAuto, AttentionImpl::kFallback};
            for (AttentionImpl impl : impls) {
                if (!on_cuda() && impl != AttentionImpl::kAuto) break;
                Guarded o(Tensor::host({c.sq, c.h, c.d}, DType::kF32));
                Guarded lse(Tensor::host({c.sq, c.h}, DType::kF32));
                ASSERT_OK(attention(ctx(), {.impl = impl, .lse = &lse.t}, dev(q), dev(k), dev(v), o.t));
                check_output(o, want.o, kAttnTol.f32);
                check_lse(lse, want.lse, kLseTol);
            }
            if (on_cuda()) { // cuDNN does not return lse and says so rather than leave it unwritten
                Tensor o = dev(Tensor::host({c.sq, c.h, c.d}, dt)),
                       lse = dev(Tensor::host({c.sq, c.h}, DType::kF32));
                EXPECT_EQ(
                    attention(ctx(), {.impl = AttentionImpl::kCudnn, .lse = &lse}, dev(q), dev(k), dev(v), o)
                        .code(),
                    ErrorCode::kUnimplemented);
                // The sm_90a kernel returns it where it runs (bf16, head dim 64 / 128, H100/H200).
                Guarded oh(Tensor::host({c.sq, c.h, c.d}, dt)), lh(Tensor::host({c.sq, c.h}, DType::kF32));
                const Status st = attention(ctx(), {.impl = AttentionImpl::kHopper, .lse = &lh.t}, dev(q),
                                            dev(k), dev(v), oh.t);
                if (st.code() != ErrorCode::kUnimplemented) {
                    ASSERT_OK(st);
                    check_output(oh, want.o, kAttnTol.bf16);
                    check_lse(lh, want.lse, kHopperLseTol);
                }
            }
        }
}

// attention over [0, sk) == merge(attention over [0, split), attention over [split, sk)), o in f32 or bf16.
TEST(OpsAttentionMerge, HalvesEqualTheWhole) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 100;
    for (const auto& c : kSplits)
        for (DType dt : kODtypes)
            for (bool in_place : {false, true}) {
                SCOPED_TRACE("split sq=" + std::to_string(c.sq) + " sk=" + std::to_string(c.sk) + " at " +
                             std::to_string(c.split) + " " + dtype_name(dt) + (in_place ? " in place" : ""));
                Tensor q = rnd({c.sq, c.h, c.d}, DType::kF32, seed++, -1.0f, 1.0f);
                Tensor k = rnd({c.sk, c.h, c.d}, DType::kF32, seed++, -1.0f, 1.0f);
                Tensor v = rnd({c.sk, c.h, c.d}, DType::kF32, seed++);
                const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
                const Exact whole = exact_attention(q, k, v, 0, c.sk, scale);
                Tensor qd = dev(q), kd = dev(k), vd = dev(v);
                auto part = [&](int64_t k0, int64_t k1, Tensor& o, Tensor& lse) {
                    return attention(ctx(), {.lse = &lse}, qd, kd.slice(0, k0, k1), vd.slice(0, k0, k1), o);
                };
                Tensor oa = dev(Tensor::host({c.sq, c.h, c.d}, dt)),
                       ob = dev(Tensor::host({c.sq, c.h, c.d}, dt));
                Tensor la = dev(Tensor::host({c.sq, c.h}, DType::kF32)),
                       lb = dev(Tensor::host({c.sq, c.h}, DType::kF32));
                ASSERT_OK(part(0, c.split, oa, la));
                ASSERT_OK(part(c.split, c.sk, ob, lb));
                const TolTable tol{{4e-5, 2e-4}, {2e-2, 1.6e-2}, {4e-3, 2e-3}}; // two roundings in bf16
                if (in_place) {
                    ASSERT_OK(attention_merge(ctx(), oa, la, ob, lb, oa, la));
                    auto oh = oa.to(Device::cpu()), lh = la.to(Device::cpu());
                    ASSERT_TRUE(oh.ok() && lh.ok());
                    Guarded og(*oh), lg(*lh);
                    check_output(og, whole.o, tol.of(dt));
                    check_lse(lg, whole.lse, kLseTol);
                } else {
                    Guarded o(Tensor::host({c.sq, c.h, c.d}, dt)),
                        lse(Tensor::host({c.sq, c.h}, DType::kF32));
                    ASSERT_OK(attention_merge(ctx(), oa, la, ob, lb, o.t, lse.t));
                    check_output(o, whole.o, tol.of(dt));
                    check_lse(lse, whole.lse, kLseTol);
                }
            }
}

// Hand-made partials against the merge formula in double: random lse with −inf on one side (an empty half,
// whose o holds NaN to prove it is not read), on both sides (a row with every key excluded), mixed dtypes.
TEST(OpsAttentionMerge, EmptyHalvesAndMaskedRows) {
    SKIP_IF_NO_BACKEND();
    const int64_t S = 37, H = 3, D = 40;
    uint32_t seed = 500;
    for (DType ta : kODtypes)
        for (DType tb : kODtypes)
            for (DType to : kODtypes) {
                SCOPED_TRACE(std::string("merge ") + dtype_name(ta) + " + " + dtype_name(tb) + " -> " +
                             dtype_name(to));
                Tensor oa = rnd({S, H, D}, ta, seed++), ob = rnd({S, H, D}, tb, seed++);
                std::vector<double> la = values(rnd({S, H}, DType::kF32, seed++, -30.0f, 30.0f));
                std::vector<double> lb = values(rnd({S, H}, DType::kF32, seed++, -30.0f, 30.0f));
                for (int64_t r = 0; r < S * H;
                     ++r) { // every third row: a empty; every fifth: b; every 7th: both
                    if (r % 3 == 0 || r % 7 == 0) la[r] = kNegInf;
                    if (r % 5 == 0 || r % 7 == 0) lb[r] = kNegInf;
                }
                auto poison = [&](Tensor& o, const std::vector<double>& l) {
                    std::vector<float> f = to_f32_vector(o).value();
                    for (int64_t r = 0; r < S * H; ++r)
                        if (l[r] == kNegInf)
                            for (int64_t c = 0; c < D; ++c)
                                f[r * D + c] = std::numeric_limits<float>::quiet_NaN();
                    o = host_tensor_from(f, o.shape(), o.dtype());
                };
                poison(oa, la);
                poison(ob, lb);
                const auto av = values(oa), bv = values(ob);
                std::vector<double> want_o(static_cast<size_t>(S * H * D), 0.0),
                    want_l(static_cast<size_t>(S * H));
                for (int64_t r = 0; r < S * H; ++r) {
                    const double m = std::max(la[r], lb[r]);
                    if (m == kNegInf) {
                        want_l[r] = kNegInf;
                        continue;
                    }
                    const double wa = la[r] == kNegInf ? 0 : std::exp(la[r] - m);
                    const double wb = lb[r] == kNegInf ? 0 : std::exp(lb[r] - m);
                    for (int64_t c = 0; c < D; ++c)
                        want_o[r * D + c] =
                            ((wa > 0 ? wa * av[r * D + c] : 0) + (wb > 0 ? wb * bv[r * D + c] : 0)) /
                            (wa + wb);
                    want_l[r] = m + std::log(wa + wb);
                }
                Guarded o(Tensor::host({S, H, D}, to)), lse(Tensor::host({S, H}, DType::kF32));
                ASSERT_OK(attention_merge(ctx(), dev(oa), dev(lse_tensor(la, {S, H})), dev(ob),
                                          dev(lse_tensor(lb, {S, H})), o.t, lse.t));
                const TolTable tol{{1e-6, 1e-5}, {1e-2, 8e-3}, {2e-3, 1e-3}}; // one rounding to o's dtype
                check_output(o, want_o, tol.of(to));
                check_lse(lse, want_l, {1e-5, 1e-6});
                // Without an lse output only o is written.
                Guarded o2(Tensor::host({S, H, D}, to));
                Tensor none;
                ASSERT_OK(attention_merge(ctx(), dev(oa), dev(lse_tensor(la, {S, H})), dev(ob),
                                          dev(lse_tensor(lb, {S, H})), o2.t, none));
                check_output(o2, want_o, tol.of(to));
            }
}

// The sm_90a bf16 kernel's lse (CUDA, H100/H200; skipped where it cannot run): against the exact double
// loop and against the fallback kernel's, over sizes off the 128-row tiles, head dims 128 and 64, and
// batches (rows of every item). Its o is checked too: writing lse must not disturb it.
struct HopperCase {
    int64_t sq, sk, h, d, batch; // sq, sk per item
};
const HopperCase kHopperCases[] = {{300, 333, 3, 128, 1},
                                   {1, 129, 2, 128, 1},
                                   {77, 1000, 2, 64, 1},
                                   {100, 150, 2, 128, 2},
                                   {65, 90, 2, 64, 3}};

Exact exact_batched(const Tensor& q, const Tensor& k, const Tensor& v, int64_t batch, double scale) {
    const int64_t sq = q.dim(0) / batch, sk = k.dim(0) / batch;
    Exact all;
    for (int64_t b = 0; b < batch; ++b) {
        const Exact e = exact_attention(q.slice(0, b * sq, (b + 1) * sq), k.slice(0, b * sk, (b + 1) * sk),
                                        v.slice(0, b * sk, (b + 1) * sk), 0, sk, scale);
        all.o.insert(all.o.end(), e.o.begin(), e.o.end());
        all.lse.insert(all.lse.end(), e.lse.begin(), e.lse.end());
    }
    return all;
}

TEST(OpsAttentionMerge, HopperKernelLse) {
    SKIP_IF_NO_BACKEND();
    if (!on_cuda()) GTEST_SKIP() << "CUDA only (the sm_90a kernel)";
    uint32_t seed = 700;
    for (const auto& c : kHopperCases) {
        SCOPED_TRACE("hopper lse sq=" + std::to_string(c.sq) + " sk=" + std::to_string(c.sk) + " h=" +
                     std::to_string(c.h) + " d=" + std::to_string(c.d) + " batch=" + std::to_string(c.batch));
        const int64_t rows = c.sq * c.batch, keys = c.sk * c.batch;
        Tensor q = rnd({rows, c.h, c.d}, DType::kBF16, seed++, -1.7f, 1.7f);
        Tensor k = rnd({keys, c.h, c.d}, DType::kBF16, seed++, -1.7f, 1.7f);
        Tensor v = rnd({keys, c.h, c.d}, DType::kBF16, seed++);
        const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
        const Exact want = exact_batched(q, k, v, c.batch, scale);
        Guarded o(Tensor::host({rows, c.h, c.d}, DType::kBF16)), lse(Tensor::host({rows, c.h}, DType::kF32));
        const AttentionParams p{.impl = AttentionImpl::kHopper, .lse = &lse.t, .batch = c.batch};
        const Status st = attention(ctx(), p, dev(q), dev(k), dev(v), o.t);
        if (st.code() == ErrorCode::kUnimplemented) GTEST_SKIP() << st.to_string(); // not an sm_90a build/GPU
        ASSERT_OK(st);
        check_output(o, want.o, kAttnTol.bf16);
        check_lse(lse, want.lse, kHopperLseTol);
        // kAuto with lse takes the same kernel; the fallback's lse agrees with it.
        Guarded la(Tensor::host({rows, c.h}, DType::kF32)), lf(Tensor::host({rows, c.h}, DType::kF32));
        Tensor oa = dev(Tensor::host({rows, c.h, c.d}, DType::kBF16)),
               of = dev(Tensor::host({rows, c.h, c.d}, DType::kBF16));
        ASSERT_OK(attention(ctx(), {.lse = &la.t, .batch = c.batch}, dev(q), dev(k), dev(v), oa));
        ASSERT_OK(attention(ctx(), {.impl = AttentionImpl::kFallback, .lse = &lf.t, .batch = c.batch}, dev(q),
                            dev(k), dev(v), of));
        check_lse(la, values(lse.host()), {0.0, 0.0});
        check_lse(lf, values(lse.host()), kHopperLseTol);
    }
}

// fp8 mode's lse: on the CPU the simulation against exact attention (what e4m3 costs, loose); on CUDA the
// e4m3 kernel against that simulation (the same operands and scales: only ex2.approx and the fp32
// tensor-core sums differ).
TEST(OpsAttentionMerge, Fp8Lse) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 800;
    const HopperCase cases[] = {{200, 333, 2, 128, 1}, {1, 150, 2, 128, 1}, {64, 3000, 1, 128, 1}};
    for (const auto& c : cases) {
        SCOPED_TRACE("fp8 lse sq=" + std::to_string(c.sq) + " sk=" + std::to_string(c.sk));
        Tensor q = rnd({c.sq, c.h, 128}, DType::kBF16, seed++, -1.7f, 1.7f);
        Tensor k = rnd({c.sk, c.h, 128}, DType::kBF16, seed++, -1.7f, 1.7f);
        Tensor v = rnd({c.sk, c.h, 128}, DType::kBF16, seed++);
        Tensor sim_o = Tensor::host({c.sq, c.h, 128}, DType::kBF16),
               sim_l = Tensor::host({c.sq, c.h}, DType::kF32);
        ASSERT_OK(attention(Context::cpu(), {.fp8 = true, .lse = &sim_l}, q, k, v, sim_o));
        if (!on_cuda()) {
            const Exact exact = exact_attention(q, k, v, 0, c.sk, 1.0 / std::sqrt(128.0));
            Guarded g(sim_l);
            check_lse(g, exact.lse, {0.15, 0.02}); // e4m3 q and k: scores off by a few percent
            continue;
        }
        Guarded o(Tensor::host({c.sq, c.h, 128}, DType::kBF16)), lse(Tensor::host({c.sq, c.h}, DType::kF32));
        const Status st = attention(ctx(), {.fp8 = true, .lse = &lse.t}, dev(q), dev(k), dev(v), o.t);
        if (st.code() == ErrorCode::kUnimplemented) GTEST_SKIP() << st.to_string(); // not an sm_90a build/GPU
        ASSERT_OK(st);
        check_output(o, values(sim_o), {2e-2, 2e-2});
        check_lse(lse, values(sim_l), kHopperLseTol);
    }
}

// What ring attention does on each rank, on one device: the keys in R chunks, each chunk's partial with its
// lse (the sm_90a kernel: bf16, or e4m3 with fp8), merged into an fp32 accumulator in chunk order, rounded
// once — equals dense attention within the bf16 bound (fp8: within the e4m3 simulation's bound of exact).
TEST(OpsAttentionMerge, ChunkedPartialsEqualDense) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 900;
    for (bool fp8 : {false, true})
        for (int64_t ring : {2, 3}) {
            const int64_t S = 1000, H = 2, D = 128, C = (S + ring - 1) / ring;
            SCOPED_TRACE(std::string(fp8 ? "fp8" : "bf16") + " ring " + std::to_string(ring));
            Tensor q = rnd({S, H, D}, DType::kBF16, seed++, -1.7f, 1.7f);
            Tensor k = rnd({S, H, D}, DType::kBF16, seed++, -1.7f, 1.7f);
            Tensor v = rnd({S, H, D}, DType::kBF16, seed++);
            const Exact exact = exact_attention(q, k, v, 0, S, 1.0 / std::sqrt(128.0));
            const Tensor dq = dev(q), dk = dev(k), dv = dev(v);
            Tensor acc = dev(Tensor::host({S, H, D}, DType::kF32)),
                   part = dev(Tensor::host({S, H, D}, DType::kBF16));
            Tensor lse = dev(Tensor::host({S, H}, DType::kF32)),
                   part_lse = dev(Tensor::host({S, H}, DType::kF32));
            for (int64_t b = 0; b < ring; ++b) {
                const Tensor kb = dk.slice(0, b * C, std::min(S, (b + 1) * C)),
                             vb = dv.slice(0, b * C, std::min(S, (b + 1) * C));
                const Status st =
                    attention(ctx(), {.fp8 = fp8, .lse = b == 0 ? &lse : &part_lse}, dq, kb, vb, part);
                if (st.code() == ErrorCode::kUnimplemented) GTEST_SKIP() << st.to_string(); // fp8 off sm_90a
                ASSERT_OK(st);
                if (b == 0)
                    ASSERT_OK(cast(ctx(), part, acc));
                else
                    ASSERT_OK(attention_merge(ctx(), acc, lse, part, part_lse, acc, lse));
            }
            Guarded o(Tensor::host({S, H, D}, DType::kBF16));
            ASSERT_OK(cast(ctx(), acc, o.t));
            if (fp8) { // e4m3 q/k/v/P per chunk: the bound of the dense e4m3 attention against exact
                const std::vector<double> got = values(o.host());
                double num = 0, den = 0;
                for (size_t i = 0; i < got.size(); ++i)
                    num += (got[i] - exact.o[i]) * (got[i] - exact.o[i]), den += exact.o[i] * exact.o[i];
                EXPECT_LT(std::sqrt(num / den), 0.08);
                continue;
            }
            check_output(o, exact.o, {2e-2, 1.6e-2}); // two roundings in bf16, as HalvesEqualTheWhole
            Guarded dense(Tensor::host({S, H, D}, DType::kBF16));
            ASSERT_OK(attention(ctx(), {}, dq, dk, dv, dense.t));
            check_output(dense, exact.o, kAttnTol.bf16);
        }
}

TEST(OpsAttentionMerge, Errors) {
    const Context cpu = Context::cpu();
    auto expect_error = [](const Status& s, const std::string& part) {
        EXPECT_FALSE(s.ok());
        EXPECT_NE(s.message().find(part), std::string::npos) << s.to_string();
    };
    Tensor o = rnd({4, 2, 8}, DType::kF32, 1), l = rnd({4, 2}, DType::kF32, 2), none;
    Tensor out = Tensor::host({4, 2, 8}, DType::kF32);
    expect_error(attention_merge(cpu, o, rnd({4, 3}, DType::kF32, 3), o, l, out, none),
                 "attention_merge: lse_a is f32[4, 3]");
    expect_error(attention_merge(cpu, o, l, o, rnd({4, 2}, DType::kBF16, 4), out, none), "must be f32");
    expect_error(attention_merge(cpu, o, l, rnd({4, 2, 9}, DType::kF32, 5), l, out, none), "o_b");
    Tensor q = rnd({3, 2, 8}, DType::kBF16, 6), k = rnd({5, 2, 8}, DType::kBF16, 7);
    Tensor ao = Tensor::host({3, 2, 8}, DType::kBF16), bad = Tensor::host({3, 4}, DType::kF32);
    expect_error(attention(cpu, {.lse = &bad}, q, k, k, ao), "attention: lse is f32[3, 4]");
    expect_error(attention(cpu, {.fp8 = true, .lse = &bad}, q, k, k, ao), "attention: lse is f32[3, 4]");
}

} // namespace
} // namespace h3::ops
