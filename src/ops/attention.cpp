// attention dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/attention.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace h3::ops {

using namespace detail;

Status attention(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& o) {
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
    if (p.causal && k.dim(0) != q.dim(0))
        return invalid_argument("attention: causal attention needs as many keys as queries; q is " + desc(q) +
                                ", k is " + desc(k));
    if (k.dim(0) == 0)
        return invalid_argument("attention: k is " + desc(k) + " but must have at least one row");
    H3_TRY(check_shape(op, "v", v, k.shape(), "k's shape"));
    H3_TRY(check_shape(op, "o", o, q.shape(), "q's shape"));
    AttentionParams resolved = p;
    if (resolved.scale == 0.0f) resolved.scale = 1.0f / std::sqrt(static_cast<float>(q.dim(2)));
    if (!(resolved.scale > 0.0f) || !std::isfinite(resolved.scale))
        return invalid_argument("attention: scale = " + std::to_string(p.scale) + " must be finite and > 0");
    H3_OPS_DISPATCH(attention, ctx, resolved, q, k, v, o);
}

} // namespace h3::ops
