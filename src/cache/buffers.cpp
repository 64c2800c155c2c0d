#include "cache/buffers.h"

#include "ops/elementwise.h"

namespace h3::cache {

bool has_shape(const Tensor& buf, const Shape& shape) {
    return buf.defined() && buf.shape() == shape;
}

Status ensure_f32(const ops::Context& ctx, const Shape& shape, Tensor& buf) {
    if (has_shape(buf, shape) && buf.dtype() == DType::kF32 && buf.device() == ctx.device) return ok_status();
    buf = Tensor(); // release first: at full width one buffer is ~0.8 GB
    H3_ASSIGN_OR_RETURN(buf, Tensor::empty(shape, DType::kF32, ctx.device));
    return ok_status();
}

Status copy_as_f32(const ops::Context& ctx, const Tensor& src, Tensor& buf) {
    H3_TRY(ensure_f32(ctx, src.shape(), buf));
    return ops::cast(ctx, src, buf);
}

size_t held_bytes(const Tensor& buf) {
    return buf.defined() ? buf.nbytes() : 0;
}

} // namespace h3::cache
