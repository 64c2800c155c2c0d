// Cache buffers: fp32 tensors on the model's device, allocated on first use and reused while the shape
// stays the same. All arithmetic on them goes through ops (axpby, rel_l1), so nothing crosses to the host
// except the scalar a decision needs.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::cache {

// `buf` becomes an fp32 tensor of `shape` on ctx.device (kept when it already is one).
Status ensure_f32(const ops::Context& ctx, const Shape& shape, Tensor& buf);
// buf = fp32 copy of src (ensure_f32 + cast).
Status copy_as_f32(const ops::Context& ctx, const Tensor& src, Tensor& buf);
// Bytes held by a buffer (0 when undefined).
size_t held_bytes(const Tensor& buf);
// True when buf is defined and has `shape`.
bool has_shape(const Tensor& buf, const Shape& shape);

} // namespace h3::cache
