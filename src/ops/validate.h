// Argument checks shared by the op dispatchers. Each returns a Status whose message names the op and the
// argument and says what was expected and what arrived, e.g. "gemm: w is bf16[64, 32] but x has K = 48".
// Internal to ops (not installed, not used by model code).
#pragma once

#include "core/tensor.h"
#include "ops/cancel.h"
#include "ops/context.h"

#include <string>

namespace h3::ops {
struct Fp8Activation;
struct RmsNormParams;
struct RopeParams;
} // namespace h3::ops

namespace h3::ops::detail {

// "bf16[64, 32]"
std::string desc(const Tensor& t);

// Context sanity: a CUDA context must carry its CudaContext.
Status check_context(const char* op, const Context& ctx);
// Defined, on ctx.device.
Status check_tensor(const char* op, const char* name, const Context& ctx, const Tensor& t);
// check_tensor + f32/bf16/f16.
Status check_float(const char* op, const char* name, const Context& ctx, const Tensor& t);
// check_float + contiguous.
Status check_float_contig(const char* op, const char* name, const Context& ctx, const Tensor& t);
Status check_rank(const char* op, const char* name, const Tensor& t, int rank);
// check_float_contig + f32 + (rank >= 0) rank `rank`: the fp32-only ops (convolutions, tiles, audio
// activations).
Status check_f32_contig(const char* op, const char* name, const Context& ctx, const Tensor& t, int rank = -1);
Status check_writable(const char* op, const char* name, const Tensor& t);
Status check_contiguous(const char* op, const char* name, const Tensor& t);
// t.shape() == expected; `why` (may be empty) explains where the expectation comes from.
Status check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected,
                   const std::string& why = "");
// A contiguous rank-1 i32/i64 vector of `len` entries on ctx.device.
Status check_index(const char* op, const char* name, const Context& ctx, const Tensor& t, int64_t len,
                   const std::string& why = "");
// Host index values in [0, limit). Device indices are not inspected (see ops/cuda/cuda_ops.h).
Status check_index_values(const char* op, const char* name, const Tensor& t, int64_t limit,
                          const std::string& limit_what);
// A 2-D float table of `cols` columns whose rows may be strided: stride(1) == 1, stride(0) >= cols.
Status check_table(const char* op, const char* name, const Context& ctx, const Tensor& t, int64_t cols,
                   const std::string& why = "");

Status cuda_not_built(const char* op);

// rope's cos/sin checks against x [S,H,Dh] (rank already checked) and rotary_dim resolution (0 =>
// cos.dim(1)); shared by rope and head_norm_rope (defined in rope.cpp).
Status check_rope_args(const char* op, const Context& ctx, const RopeParams& p, const Tensor& x,
                       const Tensor& cos, const Tensor& sin, RopeParams& resolved);
// modulate's shift/scale/row checks against x [S,D] and y; shared by modulate and rms_norm_modulate
// (defined in adaln.cpp).
Status check_modulate_args(const char* op, const Context& ctx, const Tensor& x, const Tensor& shift,
                           const Tensor& scale, const Tensor& row, const Tensor& y);
// gated_residual's checks of h [S,D] (writable), gate, y and row; shared by gated_residual and
// gated_residual_rms_norm (defined in adaln.cpp).
Status check_gated_residual_args(const char* op, const Context& ctx, const Tensor& h, const Tensor& gate,
                                 const Tensor& y, const Tensor& row);
// rms_norm's checks of x [R,D], weight (may be undefined), y (writable) and eps; shared by rms_norm and
// gated_residual_rms_norm, which name the arguments as they call them (defined in norm.cpp).
Status check_rms_norm_args(const char* op, const Context& ctx, const RmsNormParams& p, const Tensor& x,
                           const Tensor& weight, const Tensor& y, const char* x_name = "x",
                           const char* weight_name = "weight", const char* y_name = "y");

// A fused fp8 producer's output: out.data [rows, cols] f8_e4m3 and out.scale [rows] f32, contiguous and
// writable on ctx's device; `why` says where the shape comes from (defined in fp8_fused.cpp).
Status check_fp8_out(const char* op, const Context& ctx, const Fp8Activation& out, int64_t rows, int64_t cols,
                     const std::string& why);

} // namespace h3::ops::detail

// Call cpu_impl::op or cuda_impl::op by ctx.device; in a CPU-only build a CUDA context gets kUnimplemented.
// A CPU op of a cancelled job (ops/cancel.h) returns kCancelled instead of running.
#ifdef H3_WITH_CUDA
#define H3_OPS_DISPATCH(op, ...)                                                                             \
    return ctx.is_cuda()                   ? ::h3::ops::cuda_impl::op(__VA_ARGS__)                           \
           : ::h3::ops::cancel_requested() ? ::h3::ops::cancelled_in(#op)                                    \
                                           : ::h3::ops::cpu_impl::op(__VA_ARGS__)
#else
#define H3_OPS_DISPATCH(op, ...)                                                                             \
    return ctx.is_cuda()                   ? ::h3::ops::detail::cuda_not_built(#op)                          \
           : ::h3::ops::cancel_requested() ? ::h3::ops::cancelled_in(#op)                                    \
                                           : ::h3::ops::cpu_impl::op(__VA_ARGS__)
#endif
