#include "bench/dit/vsa_scan.h"

#include "ops/ops.h"

#include <chrono>
#include <tuple>
#include <utility>

namespace h3::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of `f` over `iters` calls, after one warm-up call.
template <typename F> Result<double> time_calls(const DeviceSession& session, int iters, F&& f) {
    H3_TRY(f());
    H3_TRY(session.synchronize());
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) H3_TRY(f());
    H3_TRY(session.synchronize());
    return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
}

} // namespace

Result<nlohmann::json> vsa_attention_scan(const DeviceSession& session, const model::DitConfig& c, DType dt,
                                          const ops::VsaTiles& tiles, const VsaScanParams& p) {
    const ops::Context& ctx = session.context();
    const int64_t S = tiles.rows, H = c.num_attention_heads, hd = c.attention_head_dim, n = tiles.num_tiles(),
                  P = tiles.num_prefix_tiles, nv = tiles.num_video_tiles;
    const int iters = std::max(1, p.iters);
    Tensor q, k, v, o, gate, pooled, scores, oc;
    H3_ASSIGN_OR_RETURN(q, Tensor::empty(Shape{S, H, hd}, dt, ctx.device));
    H3_ASSIGN_OR_RETURN(k, Tensor::empty(Shape{S, H, hd}, dt, ctx.device));
    H3_ASSIGN_OR_RETURN(v, Tensor::empty(Shape{S, H, hd}, dt, ctx.device));
    H3_ASSIGN_OR_RETURN(o, Tensor::empty(Shape{S, H, hd}, dt, ctx.device));
    H3_ASSIGN_OR_RETURN(gate, Tensor::empty(Shape{S, H, hd}, dt, ctx.device));
    H3_ASSIGN_OR_RETURN(pooled, Tensor::empty(Shape{3, H, n, hd}, DType::kF32, ctx.device));
    H3_ASSIGN_OR_RETURN(scores, Tensor::empty(Shape{H, n, n}, DType::kF32, ctx.device));
    H3_ASSIGN_OR_RETURN(oc, Tensor::empty(Shape{H, n, hd}, DType::kF32, ctx.device));
    uint64_t seed = 41;
    for (Tensor* t : {&q, &k, &v, &gate}) H3_TRY(ops::fill_uniform(ctx, {.seed = ++seed, .bound = 1.0f}, *t));
    Tensor qp = pooled.slice(0, 0, 1).view({H, n, hd}), kp = pooled.slice(0, 1, 2).view({H, n, hd}),
           vp = pooled.slice(0, 2, 3).view({H, n, hd});
    Tensor qk_pooled = pooled.slice(0, 0, 2);
    // The selection phase's and the compression branch's kernels one by one (they do not depend on the kept
    // fraction): what a block's VSA overhead is made of, next to the sparse kernel below.
    nlohmann::json phases = nlohmann::json::object();
    const ops::VsaGateAddParams gp{.round_intermediate = dt != DType::kF32};
    {
        H3_ASSIGN_OR_RETURN(phases["pool_one_input"],
                            time_calls(session, iters, [&] { return ops::vsa_pool(ctx, tiles, q, qp); }));
        H3_ASSIGN_OR_RETURN(phases["pool_qkv"], time_calls(session, iters, [&] {
                                return ops::vsa_pool_qkv(ctx, tiles, q, k, v, pooled);
                            }));
        H3_ASSIGN_OR_RETURN(phases["tile_scores"], time_calls(session, iters, [&] {
                                return ops::vsa_tile_scores(ctx, qp, kp, scores);
                            }));
        H3_ASSIGN_OR_RETURN(phases["compress_tiles"], time_calls(session, iters, [&] {
                                return ops::vsa_compress_tiles(ctx, scores, vp, oc);
                            }));
        H3_ASSIGN_OR_RETURN(phases["gate_add"], time_calls(session, iters, [&] {
                                return ops::vsa_gate_add(ctx, gp, tiles, oc, gate, o);
                            }));
    }
    nlohmann::json runs = nlohmann::json::array();
    double full_seconds = 0;
    for (double f : p.kept_fractions) {
        if (!(f > 0.0 && f <= 1.0))
            return invalid_argument("bench dit: kept fraction " + std::to_string(f) + " must lie in (0, 1]");
        const ops::VsaSelectParams sp{.keep = ops::vsa_keep(1.0 - f, nv), .compete = p.compete};
        const int64_t width = ops::vsa_select_width(sp, P, n);
        Tensor lists;
        H3_ASSIGN_OR_RETURN(lists, Tensor::empty(Shape{H, nv, width}, DType::kI32, ctx.device));
        auto select = [&]() -> Status {
            H3_TRY(ops::vsa_pool_qkv(ctx, tiles, q, k, Tensor(), qk_pooled));
            H3_TRY(ops::vsa_tile_scores(ctx, qp, kp, scores));
            return ops::vsa_select(ctx, sp, tiles, scores, lists);
        };
        H3_ASSIGN_OR_RETURN(double select_s, time_calls(session, iters, select));
        H3_ASSIGN_OR_RETURN(double top_k_s, time_calls(session, iters, [&] {
                                return ops::vsa_select(ctx, sp, tiles, scores, lists);
                            }));
        H3_ASSIGN_OR_RETURN(double attn_s, time_calls(session, iters, [&] {
                                return ops::block_sparse_attention(ctx, {}, tiles, q, k, v, lists, o);
                            }));
        // The mma.sync kernel on the same call, where kAuto ran another (the wgmma kernel on sm_90a).
        double mma_s = 0;
        if (ctx.is_cuda()) {
            auto mma = time_calls(session, iters, [&] {
                return ops::block_sparse_attention(ctx, {.impl = ops::BlockSparseImpl::kMma}, tiles, q, k, v,
                                                   lists, o);
            });
            if (mma.ok()) mma_s = *mma;
        }
        // The attention with the compression branch's gate add (what a gated block runs): the wgmma kernels
        // add it in their epilogue, the others run vsa_gate_add after; its cost over the plain call is the
        // gate add's (against phase_seconds.gate_add, the separate pass). Each pair is timed plain, gated,
        // gated, plain and averaged, so a clock that drifts over the scan (power-capped cards) moves both
        // alike.
        const ops::VsaFusedGateAdd fused_gate{.oc = &oc, .gate = &gate, .params = gp};
        auto pair = [&](ops::BlockSparseAttentionParams plain) -> Result<std::pair<double, double>> {
            ops::BlockSparseAttentionParams gated = plain;
            gated.gate_add = fused_gate;
            double sums[2] = {0, 0};
            for (int i : {0, 1, 1, 0}) {
                const ops::BlockSparseAttentionParams& bp = i ? gated : plain;
                H3_ASSIGN_OR_RETURN(double t, time_calls(session, iters, [&] {
                                        return ops::block_sparse_attention(ctx, bp, tiles, q, k, v, lists, o);
                                    }));
                sums[i] += t / 2;
            }
            return std::make_pair(sums[0], sums[1]);
        };
        H3_ASSIGN_OR_RETURN(const auto bf16_pair, pair({}));
        const double gated_s = bf16_pair.second;
        // The fp8 mode (e4m3 wgmma kernel with its quantization pass), where it runs.
        double fp8_s = 0, fp8_gated_s = 0;
        if (ctx.is_cuda()) {
            auto f8 = pair({.fp8 = true});
            if (f8.ok()) std::tie(fp8_s, fp8_gated_s) = *f8;
        }
        // Key tiles visited over the (head, query tile) pairs, as a fraction of every pair; the work on them
        // (64 × 64 slots per pair, pad slots counted: 4·64²·D FLOP per pair and head).
        const double visited = static_cast<double>(P * n + nv * width) / static_cast<double>(n * n);
        const double flops =
            4.0 * static_cast<double>(P * n + nv * width) * 64.0 * 64.0 * static_cast<double>(H * hd);
        // The sparse kernels kAuto does not pick, where they run: the wgmma kernel with deeper K/V rings
        // (hopper_stages 3 and 4; its default is 2), bf16 and e4m3.
        nlohmann::json variants = nlohmann::json::object();
        if (p.variants && ctx.is_cuda()) {
            using ops::BlockSparseImpl;
            const std::pair<const char*, ops::BlockSparseAttentionParams> kinds[] = {
                {"stages3", {.impl = BlockSparseImpl::kHopper, .hopper_stages = 3}},
                {"stages4", {.impl = BlockSparseImpl::kHopper, .hopper_stages = 4}},
                {"fp8_stages3", {.impl = BlockSparseImpl::kHopper, .fp8 = true, .hopper_stages = 3}},
                {"fp8_stages4", {.impl = BlockSparseImpl::kHopper, .fp8 = true, .hopper_stages = 4}}};
            for (const auto& [name, bp] : kinds) {
                auto t = time_calls(session, iters, [&, &bp = bp] {
                    return ops::block_sparse_attention(ctx, bp, tiles, q, k, v, lists, o);
                });
                variants[name] = t.ok() ? nlohmann::json{{"seconds", *t}, {"tflops", flops / *t / 1e12}}
                                        : nlohmann::json{{"error", t.status().to_string()}};
            }
        }
        if (f == 1.0) full_seconds = attn_s;
        runs.push_back({{"kept_fraction", f},
                        {"keep", sp.keep},
                        {"visited_tile_fraction", visited},
                        {"select_seconds", select_s},
                        {"top_k_seconds", top_k_s},
                        {"sparse_attention_seconds", attn_s},
                        {"sparse_tflops", flops / attn_s / 1e12},
                        {"mma_seconds", mma_s},
                        {"mma_tflops", mma_s > 0 ? flops / mma_s / 1e12 : 0.0},
                        {"fp8_seconds", fp8_s},
                        {"fp8_tflops", fp8_s > 0 ? flops / fp8_s / 1e12 : 0.0},
                        {"gated_seconds", gated_s},
                        {"gated_plain_seconds", bf16_pair.first},
                        {"fp8_gated_seconds", fp8_gated_s},
                        {"variants", variants},
                        {"vs_dense", p.dense_seconds > 0 ? attn_s / p.dense_seconds : 0.0}});
    }
    for (auto& r : runs)
        r["vs_all_tiles"] =
            full_seconds > 0 ? r["sparse_attention_seconds"].get<double>() / full_seconds : 0.0;
    return nlohmann::json{{"tiles", n},
                          {"prefix_tiles", P},
                          {"video_tiles", nv},
                          {"mode", p.compete ? "compete" : "exempt"},
                          {"dense_attention_seconds", p.dense_seconds},
                          {"phase_seconds", phases},
                          {"runs", runs}};
}

} // namespace h3::bench
