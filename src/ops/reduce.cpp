// l1_sums / rel_l1 dispatchers.
#include "ops/reduce.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <limits>

namespace h3::ops {

using namespace detail;

Result<L1Sums> l1_sums(const Context& ctx, const Tensor& cur, const Tensor& ref) {
    const char* op = "l1_sums";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "cur", ctx, cur));
    H3_TRY(check_float_contig(op, "ref", ctx, ref));
    H3_TRY(check_shape(op, "ref", ref, cur.shape(), "cur's shape"));
    L1Sums sums;
#ifdef H3_WITH_CUDA
    if (ctx.is_cuda()) {
        H3_TRY(cuda_impl::l1_sums(ctx, cur, ref, sums));
        return sums;
    }
#else
    if (ctx.is_cuda()) return cuda_not_built(op);
#endif
    H3_TRY(cpu_impl::l1_sums(ctx, cur, ref, sums));
    return sums;
}

Result<double> rel_l1(const Context& ctx, const Tensor& cur, const Tensor& ref) {
    H3_ASSIGN_OR_RETURN(L1Sums s, l1_sums(ctx, cur, ref));
    if (s.ref == 0) return s.diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
    return s.diff / s.ref;
}

} // namespace h3::ops
