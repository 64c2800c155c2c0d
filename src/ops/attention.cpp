// attention dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/attention.h"
#include "ops/provenance.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace h3::ops {

using namespace detail;

namespace {

Status validate(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                const Tensor& v, const Tensor& o, AttentionParams& resolved) {
    const char* op = "attention";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "q", ctx, q));
    H3_TRY(check_float_contig(op, "k", ctx, k));
    H3_TRY(check_float_contig(op, "v", ctx, v));
    H3_TRY(check_float_contig(op, "o", ctx, o));
    H3_TRY(check_writable(op, "o", o));
    H3_TRY(check_rank(op, "q", q, 3));
    H3_TRY(check_rank(op, "k", k, 3));
    if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
        return invalid_argument("attention: q is " + desc(q) + ", k is " + desc(k) + ", v is " + desc(v) +
                                "; q, k and v must share a dtype");
    if (k.dim(2) != q.dim(2) || k.dim(1) == 0 || q.dim(1) % k.dim(1) != 0)
        return invalid_argument("attention: k is " + desc(k) + " but q is " + desc(q) +
                                "; head dims must match and q's heads must be a multiple of k's heads");
    if (p.batch < 1 || q.dim(0) % p.batch != 0 || k.dim(0) % p.batch != 0)
        return invalid_argument("attention: batch = " + std::to_string(p.batch) +
                                " must be >= 1 and divide " + "the rows of q (" + desc(q) + ") and of k (" +
                                desc(k) + ")");
    if (p.causal && k.dim(0) != q.dim(0))
        return invalid_argument("attention: causal attention needs as many keys as queries; q is " + desc(q) +
                                ", k is " + desc(k));
    if (k.dim(0) == 0)
        return invalid_argument("attention: k is " + desc(k) + " but must have at least one row");
    H3_TRY(check_shape(op, "v", v, k.shape(), "k's shape"));
    H3_TRY(check_shape(op, "o", o, q.shape(), "q's shape"));
    if (p.fp8 && (q.dtype() != DType::kBF16 || o.dtype() != DType::kBF16))
        return invalid_argument("attention: fp8 mode takes bf16 q/k/v and o; q is " + desc(q) + ", o is " +
                                desc(o));
    if (p.lse) {
        H3_TRY(check_tensor(op, "lse", ctx, *p.lse));
        H3_TRY(check_contiguous(op, "lse", *p.lse));
        H3_TRY(check_writable(op, "lse", *p.lse));
        if (p.lse->dtype() != DType::kF32)
            return invalid_argument("attention: lse is " + desc(*p.lse) + " but must be f32");
        H3_TRY(check_shape(op, "lse", *p.lse, Shape{q.dim(0), q.dim(1)}, "[rows, heads] of q"));
    }
    resolved = p;
    if (resolved.scale == 0.0f) resolved.scale = 1.0f / std::sqrt(static_cast<float>(q.dim(2)));
    if (!(resolved.scale > 0.0f) || !std::isfinite(resolved.scale))
        return invalid_argument("attention: scale = " + std::to_string(p.scale) + " must be finite and > 0");
    return ok_status();
}

// A batched call's items one after another, each through the single-sequence implementations.
Status attention_per_item(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                          const Tensor& v, Tensor& o) {
    const int64_t sq = q.dim(0) / p.batch, sk = k.dim(0) / p.batch;
    AttentionParams one = p;
    one.batch = 1;
    for (int64_t b = 0; b < p.batch; ++b) {
        Tensor lse_b;
        if (p.lse) {
            lse_b = p.lse->slice(0, b * sq, (b + 1) * sq);
            one.lse = &lse_b;
        }
        const Tensor qb = q.slice(0, b * sq, (b + 1) * sq), kb = k.slice(0, b * sk, (b + 1) * sk),
                     vb = v.slice(0, b * sk, (b + 1) * sk);
        Tensor ob = o.slice(0, b * sq, (b + 1) * sq);
        if (ctx.is_cuda()) {
#ifdef H3_WITH_CUDA
            H3_TRY(cuda_impl::attention(ctx, one, qb, kb, vb, ob));
#endif
        } else {
            H3_TRY(cpu_impl::attention(ctx, one, qb, kb, vb, ob));
        }
    }
    return ok_status();
}

} // namespace

Status attention(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& o) {
    AttentionParams resolved;
    H3_TRY(validate(ctx, p, q, k, v, o, resolved));
    if (resolved.batch > 1) {
#ifdef H3_WITH_CUDA
        if (ctx.is_cuda()) {
            bool ran = false; // the sm_90a kernel or cuDNN's batched plan, where one covers the call
            H3_TRY(cuda_impl::attention_batched(ctx, resolved, q, k, v, o, ran));
            if (ran) return ok_status();
        }
#endif
        if (!ctx.is_cuda()) note_impl(OpFamily::kDenseAttention, resolved.fp8 ? "cpu-e4m3" : "cpu");
        return attention_per_item(ctx, resolved, q, k, v, o);
    }
    if (!ctx.is_cuda()) note_impl(OpFamily::kDenseAttention, resolved.fp8 ? "cpu-e4m3" : "cpu");
    H3_OPS_DISPATCH(attention, ctx, resolved, q, k, v, o);
}

std::vector<std::string> attention_candidates(const Context& ctx, const AttentionParams& p, const Tensor& q,
                                              const Tensor& k, const Tensor& v, const Tensor& o) {
    AttentionParams resolved;
    if (!validate(ctx, p, q, k, v, o, resolved).ok()) return {};
    if (!ctx.is_cuda()) return {"cpu"};
#ifdef H3_WITH_CUDA
    return cuda_impl::attention_candidates(ctx, resolved, q, k, v, o);
#else
    return {};
#endif
}

Status attention_candidate(const Context& ctx, const std::string& name, const AttentionParams& p,
                           const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o) {
    AttentionParams resolved;
    H3_TRY(validate(ctx, p, q, k, v, o, resolved));
    if (!ctx.is_cuda()) {
        if (name != "cpu")
            return invalid_argument("attention_candidate: the CPU has only 'cpu', not '" + name + "'");
        return resolved.batch > 1 ? attention_per_item(ctx, resolved, q, k, v, o)
                                  : cpu_impl::attention(ctx, resolved, q, k, v, o);
    }
#ifdef H3_WITH_CUDA
    if (resolved.batch > 1 && name == "fallback") { // the simple kernel runs the items one by one
        resolved.impl = AttentionImpl::kFallback;
        return attention_per_item(ctx, resolved, q, k, v, o);
    }
    return cuda_impl::attention_candidate(ctx, name, resolved, q, k, v, o);
#else
    return detail::cuda_not_built("attention_candidate");
#endif
}

} // namespace h3::ops
