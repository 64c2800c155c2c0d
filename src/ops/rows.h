// Row gather / scatter. See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// dst[i] = src[index[i]]  (src [N,D], index [M], dst [M,D]; dtypes may differ: cast on the way).
Status gather_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst);
// dst[index[i]] = src[i]  (src [M,D], index [M], dst [N,D]).
Status scatter_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst);

} // namespace h3::ops
