// Op tests for video sparse attention (ops/vsa.h), in the pattern of tests/test_ops.cpp. Default (CPU): each
// CPU reference is compared with a naive double-precision loop written here (the attention with a dense mask
// built from the key-tile lists, the selection by a full sort). With `--backend cuda` (or
// H3_TEST_BACKEND=cuda) each op runs on cuda:0 against the CPU reference on the same inputs: pooling, tile
// scores, selection and the gate add bit for bit (same summation order; the pooling without FMA, the scores
// with one correctly rounded FMA per product), the attention and the compression softmax within tolerance.
// Geometries are odd on purpose: short prefix segments, an empty one, partial cubes in t, h and w.
#include "op_harness.h"
#include "ops/ops.h"
#include "ops/provenance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace h3::ops {
namespace {

using namespace harness;

struct Geo {
    std::vector<int64_t> prefix;
    int64_t t, h, w;
};
// 7 | 0 | 65 | 130 rows of prefix (tiles 7; 64+1; 64+64+2) and a 5×6×10 grid (cubes 4/1 × 4/2 × 4/4/2).
const Geo kOdd{{7, 0, 65, 130}, 5, 6, 10};
const Geo kNoPrefix{{}, 6, 4, 9};
const Geo kSmall{{3, 40}, 4, 3, 5};
// 70 one-row prefix tiles and 1 × 2 × 9 cubes: 88 tiles, more than one 64-tile block of the CUDA kernels.
const Geo kMany{std::vector<int64_t>(70, 1), 4, 8, 36};
// 24,256 rows: 4 prefix tiles and 4 × 10 × 10 cubes (the sparse kernels' 24,000-key case).
const Geo kBig{{256}, 15, 40, 40};
// One block-sparse attention case: a geometry, its heads, the kept fraction of the video tiles, the mode.
struct SparseCase {
    Geo geo;
    int64_t heads;
    double kept;
    bool exempt;
};

// `prefix` one-row prefix tiles and `video` video tiles of 4 rows (a 1 × 1 × 4·video grid): many tiles, few
// rows.
Geo many_tiles(int64_t prefix, int64_t video) {
    return {std::vector<int64_t>(static_cast<size_t>(prefix), 1), 1, 1, 4 * video};
}

VsaTileMap map_of(const Geo& g) {
    auto m = build_vsa_tile_map({.prefix_segments = g.prefix, .grid_t = g.t, .grid_h = g.h, .grid_w = g.w});
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return *m;
}

VsaTiles tiles_on(const Context& c, const VsaTileMap& m) {
    auto t = upload_vsa_tiles(c, m);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return *t;
}

// Scores rounded to a few values so that ties are common (the lower tile index must win).
Tensor tied_scores(int64_t heads, int64_t n, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> level(0, 5);
    Tensor s = Tensor::host(Shape{heads, n, n}, DType::kF32);
    for (int64_t i = 0; i < s.numel(); ++i) s.data_as<float>()[i] = 0.25f * static_cast<float>(level(gen));
    return s;
}

// The selection by a full sort of every candidate (score desc, index asc; NaN as −inf).
std::vector<int32_t> naive_select(const std::vector<double>& scores, int64_t heads, int64_t n, int64_t P,
                                  int64_t keep, bool compete) {
    const bool exempt = !compete || P == 0;
    const int64_t width = exempt ? P + keep : std::min(keep + P, n);
    std::vector<int32_t> out;
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = P; i < n; ++i) {
            std::vector<std::pair<double, int32_t>> c;
            for (int64_t j = exempt ? P : 0; j < n; ++j) {
                double v = scores[static_cast<size_t>((h * n + i) * n + j)];
                if (std::isnan(v)) v = -INFINITY;
                c.push_back({-v, static_cast<int32_t>(j)});
            }
            std::sort(c.begin(), c.end());
            std::vector<int32_t> pick;
            if (exempt)
                for (int64_t t = 0; t < P; ++t) pick.push_back(static_cast<int32_t>(t));
            for (int64_t t = 0; t < (exempt ? keep : width); ++t)
                pick.push_back(c[static_cast<size_t>(t)].second);
            std::sort(pick.begin(), pick.end());
            out.insert(out.end(), pick.begin(), pick.end());
        }
    return out;
}

// Random ascending key-tile lists of `width` (the prefix tiles first when `exempt`).
Tensor random_lists(int64_t heads, const VsaTileMap& m, int64_t width, bool exempt, uint32_t seed) {
    const int64_t n = m.num_tiles(), P = m.num_prefix_tiles, nv = m.num_video_tiles;
    std::mt19937 gen(seed);
    Tensor l = Tensor::host(Shape{heads, nv, width}, DType::kI32);
    int32_t* p = l.data_as<int32_t>();
    for (int64_t r = 0; r < heads * nv; ++r) {
        std::vector<int32_t> pool;
        for (int64_t t = exempt ? P : 0; t < n; ++t) pool.push_back(static_cast<int32_t>(t));
        std::shuffle(pool.begin(), pool.end(), gen);
        std::vector<int32_t> pick;
        if (exempt)
            for (int64_t t = 0; t < P; ++t) pick.push_back(static_cast<int32_t>(t));
        for (size_t t = 0; pick.size() < static_cast<size_t>(width); ++t) pick.push_back(pool[t]);
        std::sort(pick.begin(), pick.end());
        std::copy(pick.begin(), pick.end(), p + r * width);
    }
    return l;
}

// softmax(q·kᵀ·scale)·v per head in double, query row r restricted to the rows of its tile's key tiles.
std::vector<double> naive_sparse_attention(const VsaTileMap& m, const std::vector<double>& q,
                                           const std::vector<double>& k, const std::vector<double>& v,
                                           const std::vector<int32_t>& lists, int64_t heads, int64_t d,
                                           int64_t width) {
    const int64_t S = m.rows, P = m.num_prefix_tiles, n = m.num_tiles();
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::vector<double> o(static_cast<size_t>(S * heads * d));
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t r = 0; r < S; ++r) {
            const int64_t t = m.row_tiles[static_cast<size_t>(r)];
            std::vector<char> sel(static_cast<size_t>(n), t < P);
            if (t >= P)
                for (int64_t w = 0; w < width; ++w)
                    sel[static_cast<size_t>(lists[static_cast<size_t>((h * (n - P) + t - P) * width + w)])] =
                        1;
            std::vector<double> s(static_cast<size_t>(S), -INFINITY);
            double mx = -INFINITY;
            for (int64_t j = 0; j < S; ++j) {
                if (!sel[static_cast<size_t>(m.row_tiles[static_cast<size_t>(j)])]) continue;
                double dot = 0;
                for (int64_t c = 0; c < d; ++c)
                    dot += q[static_cast<size_t>((r * heads + h) * d + c)] *
                           k[static_cast<size_t>((j * heads + h) * d + c)];
                s[static_cast<size_t>(j)] = dot * scale;
                mx = std::max(mx, s[static_cast<size_t>(j)]);
            }
            double l = 0;
            std::vector<double> acc(static_cast<size_t>(d), 0.0);
            for (int64_t j = 0; j < S; ++j) {
                if (s[static_cast<size_t>(j)] == -INFINITY) continue;
                const double e = std::exp(s[static_cast<size_t>(j)] - mx);
                l += e;
                for (int64_t c = 0; c < d; ++c)
                    acc[static_cast<size_t>(c)] += e * v[static_cast<size_t>((j * heads + h) * d + c)];
            }
            for (int64_t c = 0; c < d; ++c)
                o[static_cast<size_t>((r * heads + h) * d + c)] = acc[static_cast<size_t>(c)] / l;
        }
    return o;
}

std::vector<int32_t> ints(const Tensor& t) {
    Tensor h = t;
    if (!t.device().is_cpu()) {
        auto r = t.to(Device::cpu());
        EXPECT_TRUE(r.ok());
        h = *r;
    }
    return {h.data_as<const int32_t>(), h.data_as<const int32_t>() + h.numel()};
}

// Bit equality of two f32 outputs (CUDA vs the CPU reference).
void expect_same_bits(const Tensor& got, const Tensor& want) {
    auto g = values(got), w = values(want);
    ASSERT_EQ(g.size(), w.size());
    int bad = 0;
    for (size_t i = 0; i < g.size(); ++i)
        if (!(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))) && bad++ < 5)
            ADD_FAILURE() << "[" << i << "] got " << g[i] << " want " << w[i];
    EXPECT_EQ(bad, 0);
}

// ---- pooling and scores -----------------------------------------------------------------------------------
TEST(OpsVsa, PoolAndScores) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 3;
    // D = 36 is not a multiple of 8: the CUDA pooling's scalar path (the others take the 16-byte loads).
    for (const Geo& g : {kOdd, kNoPrefix, kSmall, kMany})
        for (auto [heads, d, dt] : {std::tuple{2, 128, DType::kBF16}, std::tuple{3, 32, DType::kF32},
                                    std::tuple{1, 40, DType::kF16}, std::tuple{2, 36, DType::kBF16}}) {
            SCOPED_TRACE("pool d=" + std::to_string(d) + " " + dtype_name(dt));
            const VsaTileMap m = map_of(g);
            const int64_t n = m.num_tiles();
            Tensor x = rnd(Shape{m.rows, heads, d}, dt, seed++);
            Guarded pooled(Tensor::host(Shape{heads, n, d}, DType::kF32));
            ASSERT_OK(vsa_pool(ctx(), tiles_on(ctx(), m), dev(x), pooled.t));
            if (on_cuda()) {
                Tensor want = Tensor::host(Shape{heads, n, d}, DType::kF32);
                ASSERT_OK(vsa_pool(Context::cpu(), tiles_on(Context::cpu(), m), clone(x), want));
                expect_same_bits(pooled.host(), want);
            } else {
                const auto xv = values(x);
                std::vector<double> want(static_cast<size_t>(heads * n * d), 0.0);
                for (int64_t r = 0; r < m.rows; ++r)
                    for (int64_t h = 0; h < heads; ++h)
                        for (int64_t c = 0; c < d; ++c)
                            want[static_cast<size_t>((h * n + m.row_tiles[static_cast<size_t>(r)]) * d +
                                                     c)] += xv[static_cast<size_t>((r * heads + h) * d + c)];
                for (int64_t h = 0; h < heads; ++h)
                    for (int64_t t = 0; t < n; ++t)
                        for (int64_t c = 0; c < d; ++c)
                            want[static_cast<size_t>((h * n + t) * d + c)] /=
                                m.tile_sizes[static_cast<size_t>(t)];
                check_output(pooled, want, {1e-5, 1e-5});
            }
            // Scores of two pooled tensors.
            Tensor qp = rnd(Shape{heads, n, d}, DType::kF32, seed++),
                   kp = rnd(Shape{heads, n, d}, DType::kF32, seed++);
            Guarded sc(Tensor::host(Shape{heads, n, n}, DType::kF32));
            ASSERT_OK(vsa_tile_scores(ctx(), dev(qp), dev(kp), sc.t));
            if (on_cuda()) {
                Tensor want = Tensor::host(Shape{heads, n, n}, DType::kF32);
                ASSERT_OK(vsa_tile_scores(Context::cpu(), clone(qp), clone(kp), want));
                expect_same_bits(sc.host(), want);
            } else {
                const auto a = values(qp), b = values(kp);
                std::vector<double> want(static_cast<size_t>(heads * n * n));
                for (int64_t h = 0; h < heads; ++h)
                    for (int64_t i = 0; i < n; ++i)
                        for (int64_t j = 0; j < n; ++j) {
                            double dot = 0;
                            for (int64_t c = 0; c < d; ++c)
                                dot += a[static_cast<size_t>((h * n + i) * d + c)] *
                                       b[static_cast<size_t>((h * n + j) * d + c)];
                            want[static_cast<size_t>((h * n + i) * n + j)] =
                                dot / std::sqrt(static_cast<double>(d));
                        }
                check_output(sc, want, {1e-4, 1e-5});
            }
        }
}

// q, k and v pooled in one launch: the same bits as three vsa_pool calls on the same backend (CUDA: also the
// CPU reference's), with and without v; the vector path (D = 128, bf16/f16 and f32) and the scalar one (D =
// 36), odd geometries (partial cubes, short prefix tiles).
TEST(OpsVsa, PoolQkvIsThreePools) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 700;
    for (const Geo& g : {kOdd, kMany})
        for (auto [heads, d, dt] : {std::tuple{2, 128, DType::kBF16}, std::tuple{1, 128, DType::kF32},
                                    std::tuple{2, 36, DType::kF16}}) {
            SCOPED_TRACE("pool_qkv d=" + std::to_string(d) + " " + dtype_name(dt));
            const VsaTileMap m = map_of(g);
            const int64_t n = m.num_tiles();
            const VsaTiles tiles = tiles_on(ctx(), m);
            Tensor xs[3] = {rnd(Shape{m.rows, heads, d}, dt, seed++),
                            rnd(Shape{m.rows, heads, d}, dt, seed++),
                            rnd(Shape{m.rows, heads, d}, dt, seed++)};
            for (int count : {3, 2}) {
                Guarded all(Tensor::host(Shape{count, heads, n, d}, DType::kF32));
                ASSERT_OK(vsa_pool_qkv(ctx(), tiles, dev(xs[0]), dev(xs[1]),
                                       count == 3 ? dev(xs[2]) : Tensor(), all.t));
                EXPECT_TRUE(all.guards_intact()) << "vsa_pool_qkv wrote outside its output";
                const Tensor got = all.host();
                for (int i = 0; i < count; ++i) {
                    Guarded one(Tensor::host(Shape{heads, n, d}, DType::kF32));
                    ASSERT_OK(vsa_pool(ctx(), tiles, dev(xs[i]), one.t));
                    const Tensor part = got.slice(0, i, i + 1).view({heads, n, d});
                    expect_same_bits(part, one.host());
                    if (on_cuda()) {
                        Tensor want = Tensor::host(Shape{heads, n, d}, DType::kF32);
                        ASSERT_OK(vsa_pool(Context::cpu(), tiles_on(Context::cpu(), m), clone(xs[i]), want));
                        expect_same_bits(part, want);
                    }
                }
            }
        }
}

// The tile scores and the compression branch at the full-width tile count (1344×768×124: 676 tiles), CUDA
// against the CPU reference: n = 676 is not a multiple of the kernels' 64- or 32-tile blocks; n = 675 (not a
// multiple of 4) takes the scores' scalar path; D = 100 ends in a 4-channel chunk and a partial channel
// block; D = 130 spans two channel blocks on the scalar paths; a v̄ one float off 16-byte alignment takes the
// compression's scalar path. The CPU alone would only compare its reference with itself.
TEST(OpsVsa, ScoresAndCompressFullWidth) {
    SKIP_IF_NO_BACKEND();
    if (!on_cuda()) GTEST_SKIP() << "CUDA only (the CPU is the reference)";
    uint32_t seed = 900;
    struct Case {
        int64_t heads, n, d;
        bool offset_v; // v̄ starts one float past a 16-byte boundary
    };
    for (const Case& cs : {Case{3, 676, 128, false}, Case{2, 675, 128, false}, Case{1, 676, 100, false},
                           Case{1, 676, 130, false}, Case{2, 676, 128, true}}) {
        const int64_t H = cs.heads, n = cs.n, d = cs.d;
        SCOPED_TRACE("n=" + std::to_string(n) + " d=" + std::to_string(d) + " heads=" + std::to_string(H) +
                     (cs.offset_v ? " v unaligned" : ""));
        Tensor qp = rnd(Shape{H, n, d}, DType::kF32, seed++), kp = rnd(Shape{H, n, d}, DType::kF32, seed++);
        Guarded sc(Tensor::host(Shape{H, n, n}, DType::kF32));
        ASSERT_OK(vsa_tile_scores(ctx(), dev(qp), dev(kp), sc.t));
        Tensor want_sc = Tensor::host(Shape{H, n, n}, DType::kF32);
        ASSERT_OK(vsa_tile_scores(Context::cpu(), clone(qp), clone(kp), want_sc));
        EXPECT_TRUE(sc.guards_intact()) << "vsa_tile_scores wrote outside its output";
        expect_same_bits(sc.host(), want_sc);

        // The compression of random scores in [-8, 8] (peaked rows) and v̄.
        Tensor s = rnd(Shape{H, n, n}, DType::kF32, seed++, -8.0f, 8.0f);
        Tensor vp = rnd(Shape{H, n, d}, DType::kF32, seed++);
        Tensor vp_dev = dev(vp);
        if (cs.offset_v) { // the same values one float into a larger buffer
            Tensor big = Tensor::host(Shape{H * n * d + 1}, DType::kF32);
            std::memcpy(big.data_as<float>() + 1, vp.data_as<const float>(), vp.nbytes());
            vp_dev = dev(big).slice(0, 1, H * n * d + 1).view({H, n, d});
        }
        Guarded oc(Tensor::host(Shape{H, n, d}, DType::kF32));
        ASSERT_OK(vsa_compress_tiles(ctx(), dev(s), vp_dev, oc.t));
        Tensor ref = Tensor::host(Shape{H, n, d}, DType::kF32);
        ASSERT_OK(vsa_compress_tiles(Context::cpu(), clone(s), clone(vp), ref));
        // 676-term fp32 sums, the CPU normalizing each probability first, the GPU dividing the sum at the
        // end (and expf against std::exp): a host emulation of the kernel came within 9e-7 of the CPU's
        // arithmetic at n = 676 (scores in [-2, 2]), so 5e-6 leaves a margin of 5.
        check_output(oc, values(ref), {5e-6, 2e-5});
    }
}

// ---- selection --------------------------------------------------------------------------------------------
TEST(OpsVsa, Select) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 50;
    for (const Geo& g : {kOdd, kNoPrefix, kSmall})
        for (bool compete : {false, true})
            for (int64_t keep : {int64_t{1}, int64_t{3}, int64_t{-1}}) { // -1: every video tile
                const VsaTileMap m = map_of(g);
                const int64_t heads = 3, n = m.num_tiles(), P = m.num_prefix_tiles, nv = m.num_video_tiles;
                const VsaSelectParams p{.keep = keep < 0 ? nv : std::min(keep, nv), .compete = compete};
                SCOPED_TRACE("select keep=" + std::to_string(p.keep) + (compete ? " compete" : " exempt"));
                for (int variant = 0; variant < 2; ++variant) {
                    Tensor s = variant == 0 ? tied_scores(heads, n, seed++)
                                            : rnd(Shape{heads, n, n}, DType::kF32, seed++);
                    if (variant == 1) s.data_as<float>()[(P * n) + 1] = NAN; // ranks last
                    const int64_t width = vsa_select_width(p, P, n);
                    Tensor lists_dev;
                    {
                        auto r = Tensor::empty(Shape{heads, nv, width}, DType::kI32, ctx().device);
                        ASSERT_TRUE(r.ok());
                        lists_dev = *r;
                    }
                    ASSERT_OK(vsa_select(ctx(), p, tiles_on(ctx(), m), dev(s), lists_dev));
                    std::vector<int32_t> want;
                    if (on_cuda()) {
                        Tensor l = Tensor::host(Shape{heads, nv, width}, DType::kI32);
                        ASSERT_OK(vsa_select(Context::cpu(), p, tiles_on(Context::cpu(), m), clone(s), l));
                        want = ints(l);
                    } else {
                        want = naive_select(values(s), heads, n, P, p.keep, compete);
                    }
                    EXPECT_EQ(ints(lists_dev), want);
                }
            }
}

// The CUDA selection keeps up to 2,048 candidates a row in registers (4, 8, 16, 32 or 64 a lane) and takes a
// block-wide radix select beyond: every size class, both modes, a single pick, ~10 % and every video tile,
// against the CPU reference bit for bit (CPU: the reference against the full sort, on the smallest case).
TEST(OpsVsa, SelectManyTiles) {
    SKIP_IF_NO_BACKEND();
    struct Case {
        int64_t prefix, video;
    };
    // Candidates exempt / compete: 200 / 300, 490 / 600 (the full-width shape), 700 / 760, 1,400 / 1,700,
    // 2,100 / 2,200.
    std::vector<Case> cases = {{100, 200}};
    if (on_cuda()) cases.insert(cases.end(), {{110, 490}, {60, 700}, {300, 1400}, {100, 2100}});
    uint32_t seed = 70;
    for (const Case& c : cases) {
        const VsaTileMap m = map_of(many_tiles(c.prefix, c.video));
        const int64_t heads = c.video > 1000 ? 1 : 2, n = m.num_tiles(), P = m.num_prefix_tiles,
                      nv = m.num_video_tiles;
        ASSERT_EQ(P, c.prefix);
        ASSERT_EQ(nv, c.video);
        const VsaTiles tiles = tiles_on(ctx(), m), cpu_tiles = tiles_on(Context::cpu(), m);
        for (bool compete : {false, true})
            for (int64_t keep : {int64_t{1}, (nv + 9) / 10, nv}) {
                const VsaSelectParams p{.keep = keep, .compete = compete};
                const int64_t width = vsa_select_width(p, P, n);
                SCOPED_TRACE("select n=" + std::to_string(n) + " keep=" + std::to_string(keep) +
                             (compete ? " compete" : " exempt"));
                for (int variant = 0; variant < 2; ++variant) {
                    Tensor s;
                    if (variant == 0) { // few levels: long runs of ties, +0 and −0 among them
                        s = tied_scores(heads, n, seed++);
                        float* v = s.data_as<float>();
                        for (int64_t e = 0; e < s.numel(); e += 3)
                            if (v[e] == 0.0f) v[e] = -0.0f;
                    } else { // distinct values with NaN and −inf (both rank last, by index)
                        s = rnd(Shape{heads, n, n}, DType::kF32, seed++);
                        float* v = s.data_as<float>();
                        for (int64_t e = 5; e < s.numel(); e += 97) v[e] = NAN;
                        for (int64_t e = 11; e < s.numel(); e += 89) v[e] = -INFINITY;
                    }
                    Tensor lists_dev;
                    {
                        auto r = Tensor::empty(Shape{heads, nv, width}, DType::kI32, ctx().device);
                        ASSERT_TRUE(r.ok());
                        lists_dev = *r;
                    }
                    ASSERT_OK(vsa_select(ctx(), p, tiles, dev(s), lists_dev));
                    std::vector<int32_t> want;
                    if (on_cuda()) {
                        Tensor l = Tensor::host(Shape{heads, nv, width}, DType::kI32);
                        ASSERT_OK(vsa_select(Context::cpu(), p, cpu_tiles, clone(s), l));
                        want = ints(l);
                    } else {
                        want = naive_select(values(s), heads, n, P, p.keep, compete);
                    }
                    const std::vector<int32_t> got = ints(lists_dev);
                    ASSERT_EQ(got.size(), want.size());
                    int64_t bad = 0;
                    for (size_t e = 0; e < got.size(); ++e)
                        if (got[e] != want[e] && bad++ < 5)
                            ADD_FAILURE() << "variant " << variant << " list " << e / width << " position "
                                          << e % width << ": got " << got[e] << " want " << want[e];
                    EXPECT_EQ(bad, 0);
                }
            }
    }
}

// ---- block-sparse attention
// --------------------------------------------------------------------------------
struct AttnCase {
    Geo geo;
    int64_t heads, d;
    DType dt;
    int64_t keep; // video tiles per list; -1: every tile
    bool exempt;
};

TEST(OpsVsa, BlockSparseAttention) {
    SKIP_IF_NO_BACKEND();
    const AttnCase cases[] = {
        {kOdd, 2, 128, DType::kBF16, 3, true},     {kOdd, 2, 128, DType::kBF16, 1, false},
        {kOdd, 1, 128, DType::kBF16, -1, true},    {kSmall, 2, 64, DType::kF16, 2, true},
        {kNoPrefix, 2, 64, DType::kBF16, 2, true}, {kSmall, 2, 32, DType::kF32, 2, true},
        {kOdd, 1, 48, DType::kBF16, 2, false}};
    uint32_t seed = 100;
    for (const AttnCase& c : cases) {
        const VsaTileMap m = map_of(c.geo);
        const int64_t n = m.num_tiles(), P = m.num_prefix_tiles, nv = m.num_video_tiles;
        const int64_t keep = c.keep < 0 ? nv : c.keep;
        const int64_t width = c.exempt ? P + keep : std::min(P + keep, n);
        SCOPED_TRACE("attention d=" + std::to_string(c.d) + " " + dtype_name(c.dt) + " width " +
                     std::to_string(width));
        Tensor q = rnd(Shape{m.rows, c.heads, c.d}, c.dt, seed++),
               k = rnd(Shape{m.rows, c.heads, c.d}, c.dt, seed++),
               v = rnd(Shape{m.rows, c.heads, c.d}, c.dt, seed++);
        Tensor lists = random_lists(c.heads, m, width, c.exempt, seed++);
        Guarded o(Tensor::host(Shape{m.rows, c.heads, c.d}, c.dt));
        ASSERT_OK(
            block_sparse_attention(ctx(), {}, tiles_on(ctx(), m), dev(q), dev(k), dev(v), dev(lists), o.t));
        std::vector<double> want;
        if (on_cuda()) {
            Tensor ref = Tensor::host(Shape{m.rows, c.heads, c.d}, c.dt);
            ASSERT_OK(block_sparse_attention(Context::cpu(), {}, tiles_on(Context::cpu(), m), clone(q),
                                             clone(k), clone(v), clone(lists), ref));
            want = values(ref);
        } else {
            want =
                naive_sparse_attention(m, values(q), values(k), values(v), ints(lists), c.heads, c.d, width);
        }
        // bf16/f16: the output rounding plus (CUDA) P rounded to 16 bits; f32: fp32 dot products.
        const Tol tol = c.dt == DType::kF32 ? Tol{2e-5, 1e-5} : Tol{1.5e-2, 1.5e-2};
        check_output(o, want, tol);
    }
}

// The two CUDA tensor-core kernels (CUDA only; skipped where the sm_90a kernel cannot run): the wgmma kernel
// (bf16, head dim 128) against the CPU reference and against the mma.sync kernel, over prefix tiles, partial
// cubes and padding rows, both modes, kept fractions 0.05–1.0, and a 24,000-key case; the output is poisoned
// first (Guarded fills a pattern), so an unwritten row fails.
TEST(OpsVsa, BlockSparseWgmmaKernel) {
    SKIP_IF_NO_BACKEND();
    if (!on_cuda()) GTEST_SKIP() << "CUDA only (the CPU has one implementation)";
    using Case = SparseCase;
    const Case cases[] = {{kOdd, 2, 0.05, true},       {kOdd, 2, 0.25, false},
                          {kOdd, 3, 0.5, true},        {kOdd, 1, 1.0, true},
                          {kOdd, 2, 1.0, false},       {kNoPrefix, 2, 0.3, true},
                          {kNoPrefix, 1, 0.05, false}, {{{64, 64}, 8, 8, 8}, 2, 0.25, true},
                          {kBig, 1, 0.1, true},        {kBig, 1, 0.1, false}};
    uint32_t seed = 300;
    for (const Case& c : cases) {
        const VsaTileMap m = map_of(c.geo);
        const int64_t n = m.num_tiles(), P = m.num_prefix_tiles, nv = m.num_video_tiles;
        const int64_t keep = vsa_keep(1.0 - c.kept, nv);
        const int64_t width = c.exempt ? P + keep : std::min(P + keep, n);
        SCOPED_TRACE("wgmma rows " + std::to_string(m.rows) + " heads " + std::to_string(c.heads) + " kept " +
                     std::to_string(c.kept) + (c.exempt ? " exempt" : " compete") + " width " +
                     std::to_string(width));
        Tensor q = rnd(Shape{m.rows, c.heads, 128}, DType::kBF16, seed++),
               k = rnd(Shape{m.rows, c.heads, 128}, DType::kBF16, seed++),
               v = rnd(Shape{m.rows, c.heads, 128}, DType::kBF16, seed++);
        Tensor lists = random_lists(c.heads, m, width, c.exempt, seed++);
        const VsaTiles tiles = tiles_on(ctx(), m);
        const Tensor dq = dev(q), dk = dev(k), dv = dev(v), dl = dev(lists);
        Guarded o(Tensor::host(Shape{m.rows, c.heads, 128}, DType::kBF16));
        const Status st =
            block_sparse_attention(ctx(), {.impl = BlockSparseImpl::kHopper}, tiles, dq, dk, dv, dl, o.t);
        if (st.code() == ErrorCode::kUnimplemented) GTEST_SKIP() << st.to_string(); // not an sm_90a build/GPU
        ASSERT_OK(st);
        Tensor ref = Tensor::host(Shape{m.rows, c.heads, 128}, DType::kBF16);
        ASSERT_OK(block_sparse_attention(Context::cpu(), {}, tiles_on(Context::cpu(), m), clone(q), clone(k),
                                         clone(v), clone(lists), ref));
        check_output(o, values(ref), {1.5e-2, 1.5e-2});
        // Deeper K/V rings (hopper_stages 3, 4): the same arithmetic in the same order, so the same bytes.
        for (int stages : {3, 4}) {
            SCOPED_TRACE("stages " + std::to_string(stages));
            Guarded od(Tensor::host(Shape{m.rows, c.heads, 128}, DType::kBF16));
            ASSERT_OK(block_sparse_attention(ctx(),
                                             {.impl = BlockSparseImpl::kHopper, .hopper_stages = stages},
                                             tiles, dq, dk, dv, dl, od.t));
            check_output(od, values(o.host()), {0.0, 0.0});
        }
        Guarded om(Tensor::host(Shape{m.rows, c.heads, 128}, DType::kBF16));
        ASSERT_OK(
            block_sparse_attention(ctx(), {.impl = BlockSparseImpl::kMma}, tiles, dq, dk, dv, dl, om.t));
        check_output(o, values(om.host()), {1.5e-2, 1.5e-2});
        if (c.kept == 1.0 && c.exempt) { // sparsity 0: every tile, the dense attention op
            Guarded dense(Tensor::host(Shape{m.rows, c.heads, 128}, DType::kBF16));
            ASSERT_OK(attention(ctx(), {}, dq, dk, dv, dense.t));
            check_output(o, values(dense.host()), {1.5e-2, 1.5e-2});
        }
        // kAuto takes the wgmma kernel here: the same bytes.
        Guarded oa(Tensor::host(Shape{m.rows, c.heads, 128}, DType::kBF16));
        ASSERT_OK(block_sparse_attention(ctx(), {}, tiles, dq, dk, dv, dl, oa.t));
        check_output(oa, values(o.host()), {0.0, 0.0});
    }
}

double rel_rms(const std::vector<double>& got, const std::vector<double>& want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i)
        num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
    return std::sqrt(num / std::max(den, 1e-300));
}

// The fp8 mode: on the CPU its simulation against exact sparse attention (what e4m3 costs); on CUDA the e4m3
// wgmma kernel against that simulation (the same operands and scales: only ex2.approx and the fp32
// tensor-core sums differ, which can move a P value across an e4m3 rounding boundary).
TEST(OpsVsa, BlockSparseFp8) {
    SKIP_IF_NO_BACKEND();
    using Case = SparseCase;
    std::vector<Case> cases = {{kOdd, 2, 0.25, true},
                               {kOdd, 2, 0.5, false},
                               {kOdd, 1, 0.05, true},
                               {kNoPrefix, 2, 1.0, true},
                               {{{64, 64}, 8, 8, 8}, 2, 0.25, false}};
    if (on_cuda())
        cases.push_back({kBig, 1, 0.1, true}); // 24,256 rows (the naive CPU loop would take minutes)
    uint32_t seed = 400;
    for (const Case& c : cases) {
        const VsaTileMap m = map_of(c.geo);
        const int64_t n = m.num_tiles(), P = m.num_prefix_tiles, nv = m.num_video_tiles;
        const int64_t keep = vsa_keep(1.0 - c.kept, nv);
        const int64_t width = c.exempt ? P + keep : std::min(P + keep, n);
        SCOPED_TRACE("fp8 rows " + std::to_string(m.rows) + " kept " + std::to_string(c.kept) +
                     (c.exempt ? " exempt" : " compete"));
        // q, k with unit variance (scores ~ N(0, 1)), v in [-2, 2]
        Tensor q = rnd(Shape{m.rows, c.heads, 128}, DType::kBF16, seed++, -1.7f, 1.7f),
               k = rnd(Shape{m.rows, c.heads, 128}, DType::kBF16, seed++, -1.7f, 1.7f),
               v = rnd(Shape{m.rows, c.heads, 128}, DType::kBF16, seed++);
        Tensor lists = random_lists(c.heads, m, width, c.exempt, seed++);
        Tensor sim = Tensor::host(Shape{m.rows, c.heads, 128}, DType::kBF16);
        ASSERT_OK(block_sparse_attention(Context::cpu(), {.fp8 = true}, tiles_on(Context::cpu(), m), q, k, v,
                                         lists, sim));
        const std::vector<double> want = values(sim);
        if (!on_cuda()) {
            const double cost = rel_rms(want, naive_sparse_attention(m, values(q), values(k), values(v),
                                                                     ints(lists), c.heads, 128, width));
            EXPECT_LT(cost, 0.08);
            continue;
        }
        Guarded o(Tensor::host(Shape{m.rows, c.heads, 128}, DType::kBF16));
        const Status st = block_sparse_attention(ctx(), {.fp8 = true}, tiles_on(ctx(), m), dev(q), dev(k),
                                                 dev(v), dev(lists), o.t);
        if (st.code() == ErrorCode::kUnimplemented) GTEST_SKIP() << st.to_string(); // not an sm_90a build/GPU
        ASSERT_OK(st);
        check_output(o, want, {2e-2, 2e-2});
        EXPECT_LT(rel_rms(values(o.host()), want), 0.02);
        for (int stages : {3, 4}) { // deeper K/V rings: the same bytes
            SCOPED_TRACE("stages " + std::to_string(stages));
            Guarded od(Tensor::host(Shape{m.rows, c.heads, 128}, DType::kBF16));
            ASSERT_OK(block_sparse_attention(ctx(), {.fp8 = true, .hopper_stages = stages},
                                             tiles_on(ctx(), m), dev(q), dev(k), dev(v), dev(lists), od.t));
            check_output(od, values(o.host()), {0.0, 0.0});
        }
    }
}

// Out-of-range list entries (device lists are not validated): the wgmma kernels mask such a step entirely,
// the mma.sync kernel skips it — the same result. Entries at a prefix position, the first step, the last step
// and in between.
TEST(OpsVsa, BlockSparseWgmmaOutOfRange) {
    SKIP_IF_NO_BACKEND();
    if (!on_cuda()) GTEST_SKIP() << "CUDA only (device lists are not validated)";
    const VsaTileMap m = map_of(kOdd);
    const int64_t heads = 2, n = m.num_tiles(), P = m.num_prefix_tiles, nv = m.num_video_tiles;
    const int64_t width = P + vsa_keep(0.6, nv);
    Tensor q = rnd(Shape{m.rows, heads, 128}, DType::kBF16, 601),
           k = rnd(Shape{m.rows, heads, 128}, DType::kBF16, 602),
           v = rnd(Shape{m.rows, heads, 128}, DType::kBF16, 603);
    Tensor lists = random_lists(heads, m, width, true, 604);
    int32_t* l = lists.data_as<int32_t>();
    auto at = [&](int64_t h, int64_t i, int64_t w) -> int32_t& { return l[(h * nv + i) * width + w]; };
    at(0, 0, 1) = -1;                          // a prefix position
    at(0, 2, P) = static_cast<int32_t>(n + 3); // the first video position
    at(0, 5, width - 1) = 1 << 30;             // the last step
    at(1, 6, 0) = static_cast<int32_t>(n);     // the first step
    at(1, nv - 1, width / 2) = -7;
    const VsaTiles tiles = tiles_on(ctx(), m);
    const Tensor dq = dev(q), dk = dev(k), dv = dev(v), dl = dev(lists);
    Guarded o(Tensor::host(Shape{m.rows, heads, 128}, DType::kBF16));
    const Status st =
        block_sparse_attention(ctx(), {.impl = BlockSparseImpl::kHopper}, tiles, dq, dk, dv, dl, o.t);
    if (st.code() == ErrorCode::kUnimplemented) GTEST_SKIP() << st.to_string();
    ASSERT_OK(st);
    Guarded om(Tensor::host(Shape{m.rows, heads, 128}, DType::kBF16));
    ASSERT_OK(block_sparse_attention(ctx(), {.impl = BlockSparseImpl::kMma}, tiles, dq, dk, dv, dl, om.t));
    check_output(o, values(om.host()), {1.5e-2, 1.5e-2});
}

// ---- the gate add fused into the attention (BlockSparseAttentionParams::gate_add)
// -------------------------------------------------------------------
// How many calls of the sparse attention the record saw under `impl` (any stage).
int64_t sparse_calls(const ProvenanceRecord& r, const std::string& impl) {
    int64_t n = 0;
    for (const auto& [stage, families] : r.calls()) {
        const auto f = families.find("sparse_attention");
        if (f == families.end()) continue;
        const auto i = f->second.find(impl);
        if (i != f->second.end()) n += i->second;
    }
    return n;
}

// The attention with the fused gate add against the attention followed by vsa_gate_add: the same bytes. On
// CUDA the wgmma kernels (bf16 and e4m3, every K/V ring depth) take it into their epilogue — the provenance
// says "+gate" — over prefix tiles, uneven segments, partial cubes and padding rows, both modes, kept
// fractions 0.05–1.0, with and without the intermediate rounding; a gate of another dtype, or the mma.sync
// kernel, run the two ops (and must give their bytes too). On the CPU the fused params give the composition's
// bytes, bf16 (rounded) and f32 (not), and in the fp8 simulation.
TEST(OpsVsa, BlockSparseFusedGateAdd) {
    SKIP_IF_NO_BACKEND();
    using Case = SparseCase;
    std::vector<Case> cases = {{kOdd, 2, 0.25, false}, {kNoPrefix, 1, 0.3, true}};
    if (on_cuda()) // the kernels' cases (the CPU runs the composition itself: two cases show it)
        cases.insert(cases.end(), {{kOdd, 2, 0.05, true},
                                   {kOdd, 1, 1.0, true},
                                   {kNoPrefix, 1, 0.05, false},
                                   {{{64, 64}, 8, 8, 8}, 2, 0.25, true},
                                   {kBig, 1, 0.1, true}});
    const int64_t d = 128;
    uint32_t seed = 700;
    for (const Case& c : cases) {
        const VsaTileMap m = map_of(c.geo);
        const int64_t n = m.num_tiles(), P = m.num_prefix_tiles, nv = m.num_video_tiles;
        const int64_t keep = vsa_keep(1.0 - c.kept, nv);
        const int64_t width = c.exempt ? P + keep : std::min(P + keep, n);
        const VsaTiles tiles = tiles_on(ctx(), m);
        Tensor lists = random_lists(c.heads, m, width, c.exempt, seed++);
        const Tensor dl = dev(lists);
        // bf16 (the wgmma kernels' dtype) and, on the CPU, f32
        std::vector<DType> dtypes = {DType::kBF16};
        if (!on_cuda()) dtypes.push_back(DType::kF32);
        for (DType dt : dtypes) {
            // q, k with unit variance (as the fp8 test), v, the gate and oc in [-2, 2]
            Tensor q = rnd(Shape{m.rows, c.heads, d}, dt, seed++, -1.7f, 1.7f),
                   k = rnd(Shape{m.rows, c.heads, d}, dt, seed++, -1.7f, 1.7f),
                   v = rnd(Shape{m.rows, c.heads, d}, dt, seed++),
                   o0 = rnd(Shape{m.rows, c.heads, d}, dt, seed++),
                   gate = rnd(Shape{m.rows, c.heads, d}, dt, seed++),
                   oc = rnd(Shape{c.heads, n, d}, DType::kF32, seed++);
            const Tensor dq = dev(q), dk = dev(k), dv = dev(v), dgate = dev(gate), doc = dev(oc);
            for (bool fp8 : {false, true})
                for (bool round : {false, true})
                    for (int stages : {0, 3, 4}) {
                        if (fp8 && dt != DType::kBF16) continue; // the fp8 mode takes bf16
                        if (stages != 0 && !on_cuda()) continue; // the CPU has no K/V ring
                        SCOPED_TRACE("fused gate add rows " + std::to_string(m.rows) + " " + dtype_name(dt) +
                                     " kept " + std::to_string(c.kept) + (c.exempt ? " exempt" : " compete") +
                                     (fp8 ? " e4m3" : "") + (round ? " rounded" : "") + " stages " +
                                     std::to_string(stages));
                        const VsaGateAddParams gp{.round_intermediate = round};
                        BlockSparseAttentionParams plain{.fp8 = fp8, .hopper_stages = stages};
                        if (on_cuda()) plain.impl = BlockSparseImpl::kHopper;
                        BlockSparseAttentionParams fused = plain;
                        fused.gate_add = {.oc = &doc, .gate = &dgate, .params = gp};
                        ProvenanceRecord record;
                        Guarded got(o0);
                        {
                            const ProvenanceScope scope(&record);
                            const Status st =
                                block_sparse_attention(ctx(), fused, tiles, dq, dk, dv, dl, got.t);
                            if (st.code() == ErrorCode::kUnimplemented) GTEST_SKIP() << st.to_string();
                            ASSERT_OK(st);
                        }
                        Guarded want(o0);
                        ASSERT_OK(block_sparse_attention(ctx(), plain, tiles, dq, dk, dv, dl, want.t));
                        ASSERT_OK(vsa_gate_add(ctx(), gp, tiles, doc, dgate, want.t));
                        EXPECT_TRUE(got.guards_intact());
                        expect_same_bits(got.host(), want.host());
                        const std::string impl =
                            on_cuda() ? std::string(fp8 ? "sm90a-wgmma-e4m3" : "sm90a-wgmma-bf16") + "+gate"
                                      : (fp8 ? "cpu-e4m3" : "cpu");
                        EXPECT_EQ(sparse_calls(record, impl), 1) << impl;
                    }
            if (!on_cuda()) continue;
            // The other paths run the attention, then the gate add: an f32 gate on the wgmma kernel, and the
            // mma.sync kernel.
            SCOPED_TRACE("unfused paths rows " + std::to_string(m.rows));
            const Tensor gate32 = dev(rnd(Shape{m.rows, c.heads, d}, DType::kF32, seed++));
            for (auto [impl, g] :
                 {std::pair{BlockSparseImpl::kHopper, &gate32}, {BlockSparseImpl::kMma, &dgate}}) {
                const VsaGateAddParams gp{.round_intermediate = true};
                ProvenanceRecord record;
                Guarded got(o0);
                {
                    const ProvenanceScope scope(&record);
                    ASSERT_OK(block_sparse_attention(
                        ctx(), {.impl = impl, .gate_add = {.oc = &doc, .gate = g, .params = gp}}, tiles, dq,
                        dk, dv, dl, got.t));
                }
                Guarded want(o0);
                ASSERT_OK(block_sparse_attention(ctx(), {.impl = impl}, tiles, dq, dk, dv, dl, want.t));
                ASSERT_OK(vsa_gate_add(ctx(), gp, tiles, doc, *g, want.t));
                expect_same_bits(got.host(), want.host());
                EXPECT_EQ(sparse_calls(record, impl == BlockSparseImpl::kMma ? "cuda-mma-sync-bf16"
                                                                             : "sm90a-wgmma-bf16"),
                          1);
            }
        }
    }
}

// The fused gate add's arguments: errors name the field (gate_add.oc, gate_add.gate), before anything runs.
TEST(OpsVsa, BlockSparseFusedGateAddRejectsBadArguments) {
    const Context cpu;
    const VsaTileMap m = map_of(kSmall);
    const VsaTiles t = tiles_on(cpu, m);
    const int64_t n = m.num_tiles(), P = m.num_prefix_tiles;
    const Tensor x = rnd(Shape{m.rows, 2, 8}, DType::kF32, 1);
    const Tensor lists = random_lists(2, m, P + 1, true, 3);
    const Tensor oc = rnd(Shape{2, n, 8}, DType::kF32, 2), gate = rnd(Shape{m.rows, 2, 8}, DType::kF32, 3);
    const Tensor short_oc = Tensor::host(Shape{2, n - 1, 8}, DType::kF32),
                 oc_bf16 = Tensor::host(Shape{2, n, 8}, DType::kBF16),
                 short_gate = Tensor::host(Shape{m.rows - 1, 2, 8}, DType::kF32),
                 int_gate = Tensor::host(Shape{m.rows, 2, 8}, DType::kI32);
    Tensor o = Tensor::host(x.shape(), DType::kF32);
    auto run = [&](const Tensor* oc_arg, const Tensor* gate_arg, Tensor& out) {
        return block_sparse_attention(cpu, {.gate_add = {.oc = oc_arg, .gate = gate_arg}}, t, x, x, x, lists,
                                      out);
    };
    EXPECT_TRUE(run(&oc, &gate, o).ok());
    struct Bad {
        const Tensor* oc;
        const Tensor* gate;
        const char* field;
    };
    for (const Bad& b : {Bad{&short_oc, &gate, "gate_add.oc"}, Bad{&oc_bf16, &gate, "gate_add.oc"},
                         Bad{&oc, &short_gate, "gate_add.gate"}, Bad{&oc, &int_gate, "gate_add.gate"},
                         Bad{nullptr, &gate, "gate_add.oc"}, Bad{&oc, nullptr, "gate_add.gate"}}) {
        const Status st = run(b.oc, b.gate, o);
        EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << b.field;
        EXPECT_NE(st.to_string().find(b.field), std::string::npos) << st.to_string();
    }
    // The gate (or oc) in o's memory: the fused kernel would read what it writes.
    Tensor o_is_gate = clone(gate);
    const Status st = run(&oc, &o_is_gate, o_is_gate);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(st.to_string().find("gate_add.gate"), std::string::npos) << st.to_string();
}

// Every tile listed: the CPU reference is the dense attention op, byte for byte.
TEST(OpsVsa, FullSelectionIsDenseAttention) {
    if (on_cuda()) GTEST_SKIP() << "a CPU property";
    for (DType dt : {DType::kF32, DType::kBF16}) {
        const VsaTileMap m = map_of(kOdd);
        const int64_t heads = 2, d = 32, n = m.num_tiles(), P = m.num_prefix_tiles;
        Tensor q = rnd(Shape{m.rows, heads, d}, dt, 7), k = rnd(Shape{m.rows, heads, d}, dt, 8),
               v = rnd(Shape{m.rows, heads, d}, dt, 9);
        Tensor lists = random_lists(heads, m, n, true, 1); // every tile
        Tensor sparse = Tensor::host(q.shape(), dt), dense = Tensor::host(q.shape(), dt);
        ASSERT_OK(
            block_sparse_attention(Context::cpu(), {}, tiles_on(Context::cpu(), m), q, k, v, lists, sparse));
        ASSERT_OK(attention(Context::cpu(), {}, q, k, v, dense));
        EXPECT_EQ(0, std::memcmp(sparse.data(), dense.data(), sparse.nbytes())) << dtype_name(dt);
        ASSERT_EQ(lists.dim(2), P + m.num_video_tiles);
    }
}

// ---- compression branch
// ------------------------------------------------------------------------------------
TEST(OpsVsa, CompressAndGateAdd) {
    SKIP_IF_NO_BACKEND();
    uint32_t seed = 200;
    // kMany: 88 tiles (two 64-row blocks of the CUDA kernel); D = 160 spans two 128-channel blocks; D = 36 is
    // not a multiple of 8 (the gate add's scalar path).
    for (auto [geo, heads, d, dt] :
         {std::tuple{kOdd, 2, 128, DType::kBF16}, std::tuple{kOdd, 3, 32, DType::kF32},
          std::tuple{kMany, 2, 160, DType::kBF16}, std::tuple{kMany, 1, 36, DType::kF32}}) {
        const VsaTileMap m = map_of(geo);
        const int64_t n = m.num_tiles();
        SCOPED_TRACE("compress n=" + std::to_string(n) + " d=" + std::to_string(d) + " " + dtype_name(dt));
        Tensor sc = rnd(Shape{heads, n, n}, DType::kF32, seed++, -4.0f, 4.0f);
        Tensor vp = rnd(Shape{heads, n, d}, DType::kF32, seed++);
        Guarded oc(Tensor::host(Shape{heads, n, d}, DType::kF32));
        ASSERT_OK(vsa_compress_tiles(ctx(), dev(sc), dev(vp), oc.t));
        std::vector<double> want;
        if (on_cuda()) {
            Tensor ref = Tensor::host(Shape{heads, n, d}, DType::kF32);
            ASSERT_OK(vsa_compress_tiles(Context::cpu(), clone(sc), clone(vp), ref));
            want = values(ref);
        } else {
            const auto s = values(sc), vv = values(vp);
            want.assign(static_cast<size_t>(heads * n * d), 0.0);
            for (int64_t h = 0; h < heads; ++h)
                for (int64_t i = 0; i < n; ++i) {
                    double mx = -INFINITY, sum = 0;
                    for (int64_t j = 0; j < n; ++j)
                        mx = std::max(mx, s[static_cast<size_t>((h * n + i) * n + j)]);
                    for (int64_t j = 0; j < n; ++j)
                        sum += std::exp(s[static_cast<size_t>((h * n + i) * n + j)] - mx);
                    for (int64_t j = 0; j < n; ++j) {
                        const double p = std::exp(s[static_cast<size_t>((h * n + i) * n + j)] - mx) / sum;
                        for (int64_t c = 0; c < d; ++c)
                            want[static_cast<size_t>((h * n + i) * d + c)] +=
                                p * vv[static_cast<size_t>((h * n + j) * d + c)];
                    }
                }
        }
        check_output(oc, want, {2e-6, 1e-5});

        // o += gate ⊙ oc[tile(row)], with and without the bf16 reference's intermediate rounding.
        for (bool round : {false, true}) {
            Tensor o0 = rnd(Shape{m.rows, heads, d}, dt, seed++),
                   gate = rnd(Shape{m.rows, heads, d}, dt, seed++);
            Tensor ocv = rnd(Shape{heads, n, d}, DType::kF32, seed++);
            Guarded o(o0);
            ASSERT_OK(vsa_gate_add(ctx(), {.round_intermediate = round}, tiles_on(ctx(), m), dev(ocv),
                                   dev(gate), o.t));
            std::vector<double> w;
            if (on_cuda()) {
                Tensor ref = clone(o0);
                ASSERT_OK(vsa_gate_add(Context::cpu(), {.round_intermediate = round},
                                       tiles_on(Context::cpu(), m), clone(ocv), clone(gate), ref));
                expect_same_bits(o.host(), ref);
                continue;
            }
            const auto ov = values(o0), gv = values(gate), cv = values(ocv);
            for (int64_t r = 0; r < m.rows; ++r)
                for (int64_t h = 0; h < heads; ++h)
                    for (int64_t c = 0; c < d; ++c) {
                        const size_t i = static_cast<size_t>((r * heads + h) * d + c);
                        w.push_back(ov[i] +
                                    gv[i] * cv[static_cast<size_t>(
                                                (h * n + m.row_tiles[static_cast<size_t>(r)]) * d + c)]);
                    }
            // bf16: the rounded oc, product and sum each lose up to half a bf16 ulp.
            check_output(o, w, dt == DType::kF32 ? Tol{1e-6, 1e-6} : Tol{0.05, 0.02});
        }
    }
}

// The gate add for every pair of o and gate dtypes, with and without the intermediate rounding, on the
// 8-channel vector path (D = 64) and the scalar one (D = 20): CUDA bit for bit against the CPU reference; CPU
// against a double loop.
TEST(OpsVsa, GateAddEveryDtype) {
    SKIP_IF_NO_BACKEND();
    const VsaTileMap m = map_of(kOdd);
    const int64_t heads = 2, n = m.num_tiles();
    uint32_t seed = 250;
    for (int64_t d : {int64_t{64}, int64_t{20}})
        for (DType ot : {DType::kF32, DType::kBF16, DType::kF16})
            for (DType gt : {DType::kF32, DType::kBF16, DType::kF16})
                for (bool round : {false, true}) {
                    SCOPED_TRACE(std::string("gate add o ") + dtype_name(ot) + " gate " + dtype_name(gt) +
                                 " d=" + std::to_string(d) + (round ? " rounded" : ""));
                    Tensor o0 = rnd(Shape{m.rows, heads, d}, ot, seed++),
                           gate = rnd(Shape{m.rows, heads, d}, gt, seed++),
                           ocv = rnd(Shape{heads, n, d}, DType::kF32, seed++);
                    Guarded o(o0);
                    ASSERT_OK(vsa_gate_add(ctx(), {.round_intermediate = round}, tiles_on(ctx(), m), dev(ocv),
                                           dev(gate), o.t));
                    if (on_cuda()) {
                        Tensor ref = clone(o0);
                        ASSERT_OK(vsa_gate_add(Context::cpu(), {.round_intermediate = round},
                                               tiles_on(Context::cpu(), m), clone(ocv), clone(gate), ref));
                        expect_same_bits(o.host(), ref);
                        continue;
                    }
                    const auto ov = values(o0), gv = values(gate), cv = values(ocv);
                    std::vector<double> w;
                    for (int64_t r = 0; r < m.rows; ++r)
                        for (int64_t h = 0; h < heads; ++h)
                            for (int64_t c = 0; c < d; ++c) {
                                const size_t i = static_cast<size_t>((r * heads + h) * d + c);
                                const int64_t t = m.row_tiles[static_cast<size_t>(r)];
                                w.push_back(ov[i] + gv[i] * cv[static_cast<size_t>((h * n + t) * d + c)]);
                            }
                    check_output(o, w, ot == DType::kF32 ? Tol{1e-6, 1e-6} : Tol{0.05, 0.02});
                }
}

// The gate add fused with the out projection's row quantization (vsa_gate_add_fp8): the same bytes as
// vsa_gate_add on a copy of o, then quantize_rows_fp8 of [rows, H·D], on this backend; o left as it was; on
// CUDA also the CPU reference's bytes (the gate add is bit for bit, so is the quantization of equal rows).
// D = 128 runs the CUDA kernel's 8-wide path, D = 20 the scalar one; row 2 has no tile (a row_tiles entry of
// −1: quantized as o's row).
TEST(OpsVsa, GateAddFp8IsTheGateAddThenTheRowQuantization) {
    SKIP_IF_NO_BACKEND();
    VsaTileMap m = map_of(kOdd);
    m.row_tiles[2] = -1;
    const int64_t n = m.num_tiles();
    uint32_t seed = 270;
    for (auto [heads, d] : {std::pair<int64_t, int64_t>{3, 128}, std::pair<int64_t, int64_t>{2, 20}})
        for (bool round : {false, true}) {
            SCOPED_TRACE("gate add fp8 heads=" + std::to_string(heads) + " d=" + std::to_string(d) +
                         (round ? " rounded" : ""));
            const VsaGateAddParams gp{.round_intermediate = round};
            Tensor o0 = rnd(Shape{m.rows, heads, d}, DType::kBF16, seed++, -3.0f, 3.0f),
                   gate = rnd(Shape{m.rows, heads, d}, DType::kBF16, seed++),
                   ocv = rnd(Shape{heads, n, d}, DType::kF32, seed++);
            const int64_t cols = heads * d;
            auto fp8_out = [&](const Context& c) {
                Fp8Activation a{Tensor::host({m.rows, cols}, DType::kF8E4M3),
                                Tensor::host({m.rows}, DType::kF32)};
                if (!c.device.is_cpu()) {
                    a.data = dev(a.data);
                    a.scale = dev(a.scale);
                }
                return a;
            };
            const VsaTiles tiles = tiles_on(ctx(), m);
            const Tensor d_o = dev(o0), d_gate = dev(gate), d_oc = dev(ocv);
            Fp8Activation fused = fp8_out(ctx());
            ASSERT_OK(vsa_gate_add_fp8(ctx(), gp, tiles, d_oc, d_gate, d_o, fused));
            EXPECT_EQ(host_bytes(d_o), host_bytes(o0)) << "o must be left as it was";
            // the two ops on this backend
            Guarded o(o0);
            ASSERT_OK(vsa_gate_add(ctx(), gp, tiles, d_oc, d_gate, o.t));
            Fp8Activation composed = fp8_out(ctx());
            ASSERT_OK(quantize_rows_fp8(ctx(), o.t.view({m.rows, cols}), composed));
            EXPECT_EQ(host_bytes(fused.data), host_bytes(composed.data));
            EXPECT_EQ(host_bytes(fused.scale), host_bytes(composed.scale));
            // the untiled row is o's row quantized: its bf16 values came through unchanged
            const auto ohost = host_bytes(o.t), o0b = host_bytes(o0);
            const size_t row_bytes = static_cast<size_t>(cols) * 2;
            EXPECT_TRUE(std::equal(ohost.begin() + 2 * row_bytes, ohost.begin() + 3 * row_bytes,
                                   o0b.begin() + 2 * row_bytes));
            EXPECT_FALSE(std::equal(ohost.begin(), ohost.begin() + row_bytes, o0b.begin()))
                << "row 0 is gated";
            if (on_cuda()) {
                Fp8Activation ref = fp8_out(Context::cpu());
                ASSERT_OK(vsa_gate_add_fp8(Context::cpu(), gp, tiles_on(Context::cpu(), m), clone(ocv),
                                           clone(gate), clone(o0), ref));
                EXPECT_EQ(host_bytes(fused.data), host_bytes(ref.data));
                EXPECT_EQ(host_bytes(fused.scale), host_bytes(ref.scale));
            }
        }
    // errors name the argument, before anything runs
    const Context cpu = Context::cpu();
    const VsaTiles t = tiles_on(cpu, m);
    Tensor o = rnd(Shape{m.rows, 2, 16}, DType::kBF16, 1), oc = rnd(Shape{2, n, 16}, DType::kF32, 2);
    Fp8Activation out{Tensor::host({m.rows, 32}, DType::kF8E4M3), Tensor::host({m.rows}, DType::kF32)};
    Fp8Activation short_out{Tensor::host({m.rows, 16}, DType::kF8E4M3), Tensor::host({m.rows}, DType::kF32)};
    const Tensor f32_gate = rnd(Shape{m.rows, 2, 16}, DType::kF32, 3);
    struct Bad {
        const Tensor* gate;
        Fp8Activation* out;
        const char* name;
    };
    for (const Bad& b : {Bad{&f32_gate, &out, "gate"}, Bad{&o, &short_out, "out.data"}}) {
        const Status st = vsa_gate_add_fp8(cpu, {}, t, oc, *b.gate, o, *b.out);
        EXPECT_FALSE(st.ok()) << b.name;
        EXPECT_NE(st.to_string().find(b.name), std::string::npos) << st.to_string();
    }
}

// ---- argument checks
// ---------------------------------------------------------------------------------------
TEST(OpsVsa, RejectsBadArguments) {
    const Context cpu;
    EXPECT_FALSE(build_vsa_tile_map({.prefix_segments = {4}, .grid_t = 0, .grid_h = 2, .grid_w = 2}).ok());
    EXPECT_FALSE(build_vsa_tile_map({.prefix_segments = {-1}, .grid_t = 1, .grid_h = 2, .grid_w = 2}).ok());
    const VsaTileMap m = map_of(kSmall);
    const VsaTiles t = tiles_on(cpu, m);
    const int64_t n = m.num_tiles(), P = m.num_prefix_tiles, nv = m.num_video_tiles;
    Tensor x = Tensor::host(Shape{m.rows, 2, 8}, DType::kF32),
           short_x = Tensor::host(Shape{m.rows - 1, 2, 8}, DType::kF32);
    Tensor pooled = Tensor::host(Shape{2, n, 8}, DType::kF32);
    EXPECT_TRUE(vsa_pool(cpu, t, x, pooled).ok());
    EXPECT_FALSE(vsa_pool(cpu, t, short_x, pooled).ok()) << "rows must match the tile map";
    Tensor pooled3 = Tensor::host(Shape{3, 2, n, 8}, DType::kF32),
           pooled2 = Tensor::host(Shape{2, 2, n, 8}, DType::kF32);
    EXPECT_TRUE(vsa_pool_qkv(cpu, t, x, x, x, pooled3).ok());
    EXPECT_TRUE(vsa_pool_qkv(cpu, t, x, x, Tensor(), pooled2).ok());
    EXPECT_FALSE(vsa_pool_qkv(cpu, t, x, x, Tensor(), pooled3).ok()) << "two inputs, three outputs";
    EXPECT_FALSE(vsa_pool_qkv(cpu, t, x, short_x, x, pooled3).ok()) << "k's rows must match the tile map";
    const Status mixed = vsa_pool_qkv(cpu, t, x, x, Tensor::host(x.shape(), DType::kBF16), pooled3);
    EXPECT_EQ(mixed.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(mixed.to_string().find("v is"), std::string::npos) << mixed.to_string();
    Tensor scores = Tensor::host(Shape{2, n, n}, DType::kF32);
    Tensor lists = Tensor::host(Shape{2, nv, P + 1}, DType::kI32);
    EXPECT_TRUE(vsa_select(cpu, {.keep = 1}, t, scores, lists).ok());
    EXPECT_FALSE(vsa_select(cpu, {.keep = 2}, t, scores, lists).ok()) << "lists width must match keep";
    EXPECT_FALSE(vsa_select(cpu, {.keep = nv + 1}, t, scores, lists).ok()) << "keep beyond the video tiles";
    Tensor bad = random_lists(2, m, P + 1, true, 3);
    bad.data_as<int32_t>()[0] = static_cast<int32_t>(n); // out of range
    EXPECT_FALSE(block_sparse_attention(cpu, {}, t, x, x, x, bad, pooled).ok());
    Tensor o = Tensor::host(x.shape(), DType::kF32);
    Tensor dup = random_lists(2, m, P + 1, true, 3);
    dup.data_as<int32_t>()[1] = dup.data_as<int32_t>()[0]; // not strictly ascending
    EXPECT_FALSE(block_sparse_attention(cpu, {}, t, x, x, x, dup, o).ok());
    EXPECT_TRUE(block_sparse_attention(cpu, {}, t, x, x, x, random_lists(2, m, P + 1, true, 3), o).ok());
    for (int stages : {1, 5, -2}) {
        const Status st = block_sparse_attention(cpu, {.hopper_stages = stages}, t, x, x, x,
                                                 random_lists(2, m, P + 1, true, 3), o);
        EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << stages;
        EXPECT_NE(st.to_string().find("hopper_stages"), std::string::npos) << st.to_string();
    }
    EXPECT_TRUE(
        block_sparse_attention(cpu, {.hopper_stages = 3}, t, x, x, x, random_lists(2, m, P + 1, true, 3), o)
            .ok());
}

} // namespace
} // namespace h3::ops
