#include "model/audio_vae/audio_vae_common.h"

#include <cmath>

namespace h3::model {

void fold_weight_norm(const Tensor& g, Tensor& v) {
    const int64_t rows = v.dim(0), cols = v.numel() / rows;
    float* vp = v.data_as<float>();
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < cols; ++i) ss += static_cast<double>(vp[r * cols + i]) * vp[r * cols + i];
        const double f = g.data_as<const float>()[r] / std::sqrt(ss);
        for (int64_t i = 0; i < cols; ++i) vp[r * cols + i] = static_cast<float>(vp[r * cols + i] * f);
    }
}

Result<Tensor> alloc_f32(const ops::Context& ctx, const Shape& s) {
    return Tensor::empty(s, DType::kF32, ctx.device);
}

Result<Tensor> run_conv1d(const ops::Context& ctx, const ops::Conv1dParams& p, const AudioConv& c,
                          const Tensor& x) {
    const int64_t lout = ops::conv1d_out_length(x.dim(2), c.w.dim(2), p);
    H3_ASSIGN_OR_RETURN(Tensor y, alloc_f32(ctx, Shape{x.dim(0), c.w.dim(0), lout}));
    H3_TRY(ops::conv1d(ctx, p, x, c.w, c.b, y));
    return y;
}

} // namespace h3::model
