// modulate / gated_residual dispatchers (and their argument checks, shared with the fused ops): validation,
// then the CPU reference or the CUDA implementation.
#include "ops/adaln.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <algorithm>

namespace h3::ops {

namespace detail {

Status check_modulate_args(const char* op, const Context& ctx, const Tensor& x, const Tensor& shift,
                           const Tensor& scale, const Tensor& row, const Tensor& y) {
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_writable(op, "y", y));
    H3_TRY(check_shape(op, "y", y, x.shape(), "x's shape"));
    const int64_t s = x.dim(0), d = x.dim(1);
    H3_TRY(check_table(op, "shift", ctx, shift, d, "x's last dim"));
    H3_TRY(check_table(op, "scale", ctx, scale, d, "x's last dim"));
    H3_TRY(check_index(op, "row", ctx, row, s, "one table row per x row"));
    // shift and scale are indexed by the same row, so both must hold it.
    const int64_t t = std::min(shift.dim(0), scale.dim(0));
    return check_index_values(op, "row", row, t, "table rows of shift/scale");
}

Status check_gated_residual_args(const char* op, const Context& ctx, const Tensor& h, const Tensor& gate,
                                 const Tensor& y, const Tensor& row) {
    H3_TRY(check_float_contig(op, "h", ctx, h));
    H3_TRY(check_writable(op, "h", h));
    H3_TRY(check_rank(op, "h", h, 2));
    H3_TRY(check_float_contig(op, "y", ctx, y));
    H3_TRY(check_shape(op, "y", y, h.shape(), "h's shape"));
    H3_TRY(check_table(op, "gate", ctx, gate, h.dim(1), "h's last dim"));
    H3_TRY(check_index(op, "row", ctx, row, h.dim(0), "one table row per h row"));
    return check_index_values(op, "row", row, gate.dim(0), "table rows of gate");
}

} // namespace detail

using namespace detail;

Status modulate(const Context& ctx, const ModulateParams& p, const Tensor& x, const Tensor& shift,
                const Tensor& scale, const Tensor& row, Tensor& y) {
    const char* op = "modulate";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "x", ctx, x));
    H3_TRY(check_rank(op, "x", x, 2));
    H3_TRY(check_modulate_args(op, ctx, x, shift, scale, row, y));
    H3_OPS_DISPATCH(modulate, ctx, p, x, shift, scale, row, y);
}

Status gated_residual(const Context& ctx, const GatedResidualParams& p, Tensor& h, const Tensor& gate,
                      const Tensor& y, const Tensor& row) {
    const char* op = "gated_residual";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_gated_residual_args(op, ctx, h, gate, y, row));
    H3_OPS_DISPATCH(gated_residual, ctx, p, h, gate, y, row);
}

} // namespace h3::ops
