#include "model/lora/lora_apply.h"

#include "ops/ops.h"

namespace h3::model {

Status lora_apply(const ops::Context& ctx, const LoraFactors& factors, const Tensor& x, Tensor& y,
                  const Tensor& scratch) {
    const int64_t rows = x.dim(0);
    for (const LoraDeviceFactor& f : factors) {
        const int64_t r = f.a.dim(0);
        if (!scratch.defined() || scratch.dtype() != x.dtype() || !scratch.is_contiguous() ||
            scratch.numel() < rows * r)
            return internal_error("LoRA scratch holds " +
                                  (scratch.defined() ? scratch.describe() : "nothing") +
                                  ", the adapter needs " + std::to_string(rows) + "×" + std::to_string(r) +
                                  " " + dtype_name(x.dtype()));
        Tensor t = Tensor::from_storage(scratch.storage(), scratch.byte_offset(), Shape{rows, r}, x.dtype());
        H3_TRY(ops::gemm(ctx, {}, x, f.a, Tensor(), t));
        H3_TRY(ops::gemm(ctx, {.alpha = f.scale, .accumulate = true}, t, f.b, Tensor(), y));
    }
    return ok_status();
}

Status lora_merge(const ops::Context& ctx, const std::vector<LoraMergeTerm>& terms, Tensor& w) {
    if (terms.empty()) return ok_status();
    if (w.rank() != 2) return invalid_argument("lora_merge: weight is " + w.describe());
    const int64_t out = w.dim(0), in = w.dim(1);
    auto on_device = [&](const Tensor& host) -> Result<Tensor> {
        if (ctx.device.is_cpu()) return host;
        return host.to(ctx.device, ctx.stream());
    };
    Tensor w32 = w;
    if (w.dtype() != DType::kF32) {
        H3_ASSIGN_OR_RETURN(w32, Tensor::empty(w.shape(), DType::kF32, ctx.device));
        H3_TRY(ops::cast(ctx, w, w32));
    }
    for (const LoraMergeTerm& term : terms) {
        const LoraFactor& f = *term.factor;
        const int64_t r = f.rank();
        if (f.a.dim(1) != in || f.b.dim(0) != out || f.b.dim(1) != r)
            return invalid_argument("lora_merge: " + lora_target_name(f.target) + " factors A " +
                                    f.a.shape().to_string() + ", B " + f.b.shape().to_string() +
                                    " do not fit the weight " + w.shape().to_string());
        // B·A = gemm(x = B [out, r], w = Aᵀ [in, r]); both widened exactly to fp32.
        H3_ASSIGN_OR_RETURN(std::vector<float> av, to_f32_vector(f.a));
        Tensor at = Tensor::host(Shape{in, r}, DType::kF32);
        float* atp = at.data_as<float>();
        for (int64_t i = 0; i < r; ++i)
            for (int64_t j = 0; j < in; ++j) atp[j * r + i] = av[static_cast<size_t>(i * in + j)];
        H3_ASSIGN_OR_RETURN(Tensor b32, f.b.to_dtype(DType::kF32));
        H3_ASSIGN_OR_RETURN(Tensor at_d, on_device(at));
        H3_ASSIGN_OR_RETURN(Tensor b_d, on_device(b32));
        H3_TRY(
            ops::gemm(ctx, {.alpha = f.scale * term.strength, .accumulate = true}, b_d, at_d, Tensor(), w32));
    }
    if (w.dtype() != DType::kF32) H3_TRY(ops::cast(ctx, w32, w));
    return ok_status();
}

} // namespace h3::model
