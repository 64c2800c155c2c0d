#include "bench/dit/attention.h"

#include "ops/ops.h"

#include <chrono>

namespace h3::bench {

namespace {
using Clock = std::chrono::steady_clock;
} // namespace

Result<ForwardDataAttention> time_forward_data_attention(const DitBench& b, BlockState& st, int iters,
                                                         bool every_candidate) {
    const ops::Context& ctx = b.ctx();
    const int64_t S = b.rows(), Hh = b.config.num_attention_heads, hd = b.config.attention_head_dim;
    auto view = [&](const Tensor& buf) {
        return Tensor::from_storage(buf.storage(), buf.byte_offset(), Shape{S, Hh, hd}, buf.dtype());
    };
    const Tensor fq = view(st.scratch.q), fk = view(st.scratch.k), fv = view(st.scratch.v);
    Tensor fo3 = view(st.scratch.o);
    const ops::AttentionParams ap{.fp8 = b.fp8()};
    auto time_attention = [&](const std::string& candidate) -> Result<double> {
        auto run = [&] {
            return candidate.empty() ? ops::attention(ctx, ap, fq, fk, fv, fo3)
                                     : ops::attention_candidate(ctx, candidate, ap, fq, fk, fv, fo3);
        };
        H3_TRY(run()); // warm-up
        H3_TRY(b.session->synchronize());
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) H3_TRY(run());
        H3_TRY(b.session->synchronize());
        return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    };
    ForwardDataAttention out;
    H3_ASSIGN_OR_RETURN(out.seconds, time_attention(""));
    if (every_candidate)
        for (const std::string& n : ops::attention_candidates(ctx, ap, fq, fk, fv, fo3)) {
            auto t = time_attention(n);
            out.candidates.push_back({n, t.ok() ? *t : 0.0});
        }
    return out;
}

Result<double> time_synthetic_attention(const DitBench& b, int iters) {
    const ops::Context& ctx = b.ctx();
    const int64_t S = b.rows(), Hh = b.config.num_attention_heads, hd = b.config.attention_head_dim;
    const DType dt = b.dit->act_dtype();
    auto q = Tensor::empty(Shape{S, Hh, hd}, dt, ctx.device);
    auto k = Tensor::empty(Shape{S, Hh, hd}, dt, ctx.device);
    auto v = Tensor::empty(Shape{S, Hh, hd}, dt, ctx.device);
    auto out = Tensor::empty(Shape{S, Hh, hd}, dt, ctx.device);
    if (!q.ok() || !k.ok() || !v.ok() || !out.ok()) return internal_error("attention buffers");
    for (auto* t : {&*q, &*k, &*v}) H3_TRY(ops::fill_uniform(ctx, {.seed = 5, .bound = 1.0f}, *t));
    const ops::AttentionParams ap{.fp8 = b.fp8()};
    H3_TRY(ops::attention(ctx, ap, *q, *k, *v, *out)); // warm-up
    H3_TRY(b.session->synchronize());
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) H3_TRY(ops::attention(ctx, ap, *q, *k, *v, *out));
    H3_TRY(b.session->synchronize());
    return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
}

} // namespace h3::bench
