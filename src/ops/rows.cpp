// gather_rows / scatter_rows dispatchers: validation, then the CPU reference or the CUDA implementation.
#include "ops/rows.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

namespace {

// src [Ns,D], index [M], dst [Nd,D]: `m_is_src` says which side has one row per index entry.
Status check_rows(const char* op, const Context& ctx, const Tensor& src, const Tensor& index,
                  const Tensor& dst, bool m_is_src) {
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_float_contig(op, "src", ctx, src));
    H3_TRY(check_float_contig(op, "dst", ctx, dst));
    H3_TRY(check_writable(op, "dst", dst));
    H3_TRY(check_rank(op, "src", src, 2));
    H3_TRY(check_rank(op, "dst", dst, 2));
    if (dst.dim(1) != src.dim(1))
        return invalid_argument(std::string(op) + ": dst is " + desc(dst) + " but src is " + desc(src) +
                                "; rows must have the same width");
    const Tensor& per_index = m_is_src ? src : dst;
    const Tensor& indexed = m_is_src ? dst : src;
    H3_TRY(check_index(op, "index", ctx, index, per_index.dim(0), m_is_src ? "src rows" : "dst rows"));
    return check_index_values(op, "index", index, indexed.dim(0), m_is_src ? "dst rows" : "src rows");
}

} // namespace

Status gather_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst) {
    H3_TRY(check_rows("gather_rows", ctx, src, index, dst, /*m_is_src=*/false));
    H3_OPS_DISPATCH(gather_rows, ctx, src, index, dst);
}

Status scatter_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst) {
    H3_TRY(check_rows("scatter_rows", ctx, src, index, dst, /*m_is_src=*/true));
    H3_OPS_DISPATCH(scatter_rows, ctx, src, index, dst);
}

} // namespace h3::ops
