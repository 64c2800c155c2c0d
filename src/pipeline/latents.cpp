#include "pipeline/latents.h"

#include <algorithm>

namespace h3::pipeline {

namespace {

Status expect_shape(const Tensor& t, const Shape& want, const std::string& what) {
    if (!(t.shape() == want))
        return invalid_argument(what + " has shape " + t.shape().to_string() + ", expected " +
                                want.to_string());
    if (!dtype_is_float(t.dtype()))
        return invalid_argument(what + " must be a float tensor, got " + t.describe());
    return ok_status();
}

Result<Tensor> host_f32(const Tensor& t) {
    H3_ASSIGN_OR_RETURN(Tensor h, t.to(Device::cpu()));
    return h.to_dtype(DType::kF32);
}

} // namespace

Tensor patchify_video(const Tensor& latents, int ph, int pw) {
    const int64_t C = latents.dim(1), T = latents.dim(2), H = latents.dim(3), W = latents.dim(4);
    const int64_t hh = H / ph, ww = W / pw;
    Tensor rows = Tensor::host(Shape{T * hh * ww, C * ph * pw}, DType::kF32);
    const float* src = latents.data_as<float>();
    float* dst = rows.data_as<float>();
    for (int64_t t = 0; t < T; ++t)
        for (int64_t y = 0; y < hh; ++y)
            for (int64_t x = 0; x < ww; ++x) {
                float* row = dst + ((t * hh + y) * ww + x) * C * ph * pw;
                for (int64_t c = 0; c < C; ++c)
                    for (int a = 0; a < ph; ++a)
                        for (int b = 0; b < pw; ++b)
                            row[(c * ph + a) * pw + b] = src[((c * T + t) * H + y * ph + a) * W + x * pw + b];
            }
    return rows;
}

Tensor unpatchify_video(const Tensor& rows, int C, int T, int H, int W, int ph, int pw) {
    const int64_t hh = H / ph, ww = W / pw;
    Tensor lat = Tensor::host(Shape{1, C, T, H, W}, DType::kF32);
    const float* src = rows.data_as<float>();
    float* dst = lat.data_as<float>();
    for (int64_t t = 0; t < T; ++t)
        for (int64_t y = 0; y < hh; ++y)
            for (int64_t x = 0; x < ww; ++x) {
                const float* row = src + ((t * hh + y) * ww + x) * C * ph * pw;
                for (int64_t c = 0; c < C; ++c)
                    for (int a = 0; a < ph; ++a)
                        for (int b = 0; b < pw; ++b)
                            dst[((c * T + t) * H + y * ph + a) * W + x * pw + b] = row[(c * ph + a) * pw + b];
            }
    return lat;
}

Tensor audio_to_rows(const Tensor& audio) {
    const int64_t ch = audio.dim(0), k = audio.dim(1), A = audio.dim(2);
    Tensor rows = Tensor::host(Shape{ch * A, k}, DType::kF32);
    const float* s = audio.data_as<float>();
    float* d = rows.data_as<float>();
    for (int64_t c = 0; c < ch; ++c)
        for (int64_t j = 0; j < k; ++j)
            for (int64_t a = 0; a < A; ++a) d[(c * A + a) * k + j] = s[(c * k + j) * A + a];
    return rows;
}

Tensor rows_to_audio(const Tensor& rows, int A) {
    const int64_t k = rows.dim(1), ch = rows.dim(0) / A;
    Tensor audio = Tensor::host(Shape{ch, k, A}, DType::kF32);
    const float* s = rows.data_as<float>();
    float* d = audio.data_as<float>();
    for (int64_t c = 0; c < ch; ++c)
        for (int64_t j = 0; j < k; ++j)
            for (int64_t a = 0; a < A; ++a) d[(c * k + j) * A + a] = s[(c * A + a) * k + j];
    return audio;
}

Result<InitialLatents> prepare_latents(const Geometry& g, const NoiseRequest& rq) {
    TorchGenerator gen(rq.seed, rq.kernel);
    InitialLatents out;
    const Shape video_shape{1, kLatentChannels, g.latent_frames, g.latent_h, g.latent_w};
    const Shape frame_shape{1, kLatentChannels, 1, g.latent_h, g.latent_w};

    std::vector<Tensor> cond;
    for (size_t k = 0; k < rq.keyframes.size(); ++k) {
        const std::string what = "keyframe " + std::to_string(k) + " latents";
        H3_TRY(expect_shape(rq.keyframes[k].latents, frame_shape, what));
        H3_ASSIGN_OR_RETURN(Tensor z, host_f32(rq.keyframes[k].latents));
        Tensor noise = Tensor::host(frame_shape, DType::kF32);
        gen.randn(noise.data_as<float>(), static_cast<size_t>(noise.numel()));
        // scale_noise(z, 0.999, ε) = t·z + (1 − t)·ε, one fp32 rounding per tensor op.
        const float t = kKeyframeNoiseAug, one_minus = 1.0f - kKeyframeNoiseAug;
        float* zp = z.data_as<float>();
        const float* np = noise.data_as<float>();
        for (int64_t i = 0; i < z.numel(); ++i) {
            const float a = t * zp[i];
            const float b = one_minus * np[i];
            zp[i] = a + b;
        }
        cond.push_back(patchify_video(z));
    }
    if (!cond.empty()) {
        const int64_t cols = cond[0].dim(1);
        int64_t total = 0;
        for (auto& c : cond) total += c.dim(0);
        out.condition_rows = Tensor::host(Shape{total, cols}, DType::kF32);
        int64_t off = 0;
        for (auto& c : cond) {
            std::copy_n(c.data_as<float>(), c.numel(), out.condition_rows.data_as<float>() + off);
            off += c.numel();
        }
    }

    if (rq.video_noise) {
        H3_TRY(expect_shape(*rq.video_noise, video_shape, "video noise"));
        H3_ASSIGN_OR_RETURN(out.video_noise, host_f32(*rq.video_noise));
    } else {
        out.video_noise = Tensor::host(video_shape, DType::kF32);
        gen.randn(out.video_noise.data_as<float>(), static_cast<size_t>(out.video_noise.numel()));
    }
    out.video_rows = patchify_video(out.video_noise);

    const Shape audio_shape{kAudioChannels, kAudioLatentChannels, g.audio_latents};
    if (rq.audio_noise) {
        H3_TRY(expect_shape(*rq.audio_noise, audio_shape, "audio noise"));
        H3_ASSIGN_OR_RETURN(out.audio_noise, host_f32(*rq.audio_noise));
        out.audio_rows = audio_to_rows(out.audio_noise);
    } else {
        out.audio_rows = Tensor::host(
            Shape{static_cast<int64_t>(kAudioChannels) * g.audio_latents, kAudioLatentChannels}, DType::kF32);
        gen.randn(out.audio_rows.data_as<float>(), static_cast<size_t>(out.audio_rows.numel()));
        out.audio_noise = rows_to_audio(out.audio_rows, g.audio_latents);
    }
    return out;
}

} // namespace h3::pipeline
