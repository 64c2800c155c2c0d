// sample_to_rgb8 dispatcher: validation, then the CPU reference or the CUDA implementation.
#include "ops/frames.h"

#include "ops/cpu/cpu_ops.h"
#include "ops/validate.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace h3::ops {

using namespace detail;

Status sample_to_rgb8(const Context& ctx, const SampleToRgb8Params& p, const Tensor& sample, Tensor& frames) {
    const char* op = "sample_to_rgb8";
    H3_TRY(check_context(op, ctx));
    H3_TRY(check_tensor(op, "sample", ctx, sample));
    H3_TRY(check_rank(op, "sample", sample, 4));
    if (sample.dtype() != DType::kF32 || sample.dim(0) != 3)
        return invalid_argument("sample_to_rgb8: sample is " + desc(sample) + ", expected f32[3, F, H, W]");
    // each channel plane contiguous (a frame range of a larger sample is allowed), planes apart by stride(0)
    const int64_t plane = sample.dim(1) * sample.dim(2) * sample.dim(3);
    if (sample.stride(3) != 1 || sample.stride(2) != sample.dim(3) ||
        sample.stride(1) != sample.dim(2) * sample.dim(3) || sample.stride(0) < plane)
        return invalid_argument("sample_to_rgb8: sample " + desc(sample) +
                                " must be contiguous, or a frame range of a contiguous sample");
    H3_TRY(check_tensor(op, "frames", ctx, frames));
    if (frames.dtype() != DType::kU8)
        return invalid_argument("sample_to_rgb8: frames is " + desc(frames) + ", expected u8");
    H3_TRY(check_shape(op, "frames", frames, Shape{sample.dim(1), sample.dim(2), sample.dim(3), 3},
                       "[F, H, W, 3] of the sample " + desc(sample)));
    H3_TRY(check_contiguous(op, "frames", frames));
    H3_TRY(check_writable(op, "frames", frames));
    for (int c = 0; c < 3; ++c)
        if (!(p.stddev[static_cast<size_t>(c)] == p.stddev[static_cast<size_t>(c)]) ||
            !(p.mean[static_cast<size_t>(c)] == p.mean[static_cast<size_t>(c)]))
            return invalid_argument("sample_to_rgb8: channel " + std::to_string(c) +
                                    "'s mean or stddev is NaN");
    H3_OPS_DISPATCH(sample_to_rgb8, ctx, p, sample, frames);
}

} // namespace h3::ops
