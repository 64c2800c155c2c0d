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

static Tensor concat_rows(const std::vector<Tensor>& parts) {
    const int64_t cols = parts[0].dim(1);
    int64_t total = 0;
    for (const Tensor& c : parts) total += c.dim(0);
    Tensor out = Tensor::host(Shape{total, cols}, DType::kF32);
    int64_t off = 0;
    for (const Tensor& c : parts) {
        std::copy_n(c.data_as<float>(), c.numel(), out.data_as<float>() + off);
        off += c.numel();
    }
    return out;
}

ReferenceBlock reference_block(const ReferenceCondition& r, const model::LatentSpec& spec) {
    ReferenceBlock b;
    b.kind = r.kind;
    if (r.kind != ReferenceKind::kAudio && r.latents.defined() && r.latents.rank() == 5) {
        b.latent_frames = static_cast<int>(r.latents.dim(2));
        b.latent_h = static_cast<int>(r.latents.dim(3));
        b.latent_w = static_cast<int>(r.latents.dim(4));
    }
    if (r.audio_rows.defined() && r.audio_rows.rank() == 2)
        b.audio_latents = static_cast<int>(r.audio_rows.dim(0) / spec.audio_channels);
    return b;
}

Result<InitialLatents> prepare_latents(const Geometry& g, const NoiseRequest& rq) {
    TorchGenerator gen(rq.seed, rq.kernel);
    InitialLatents out;
    const model::LatentSpec& spec = g.spec;
    const int ph = spec.patch_h, pw = spec.patch_w;
    const int64_t channels = spec.latent_channels, audio_channels = spec.audio_channels,
                  audio_latent_channels = spec.audio_latent_channels;
    const Shape video_shape{1, channels, g.latent_frames, g.latent_h, g.latent_w};
    const Shape frame_shape{1, channels, 1, g.latent_h, g.latent_w};

    // scale_noise(z, 0.999, ε) = t·z + (1 − t)·ε, one fp32 rounding per tensor op, then patchified.
    auto noised_rows = [&](const Tensor& latents, const std::string& what) -> Result<Tensor> {
        H3_ASSIGN_OR_RETURN(Tensor z, host_f32(latents));
        Tensor noise = Tensor::host(z.shape(), DType::kF32);
        gen.randn(noise.data_as<float>(), static_cast<size_t>(noise.numel()));
        const float t = kKeyframeNoiseAug, one_minus = 1.0f - kKeyframeNoiseAug;
        float* zp = z.data_as<float>();
        const float* np = noise.data_as<float>();
        for (int64_t i = 0; i < z.numel(); ++i) {
            const float a = t * zp[i];
            const float b = one_minus * np[i];
            zp[i] = a + b;
        }
        if (z.dim(3) % ph || z.dim(4) % pw)
            return invalid_argument(what + " " + z.shape().to_string() +
                                    ": latent height and width must be " + "multiples of the patch " +
                                    std::to_string(ph) + "x" + std::to_string(pw));
        return patchify_video(z, ph, pw);
    };
    std::vector<Tensor> cond;
    for (size_t k = 0; k < rq.keyframes.size(); ++k) {
        const std::string what = "keyframe " + std::to_string(k) + " latents";
        H3_TRY(expect_shape(rq.keyframes[k].latents, frame_shape, what));
        H3_ASSIGN_OR_RETURN(Tensor rows, noised_rows(rq.keyframes[k].latents, what));
        cond.push_back(std::move(rows));
    }
    std::vector<Tensor> cond_audio;
    for (size_t k = 0; k < rq.references.size(); ++k) {
        const ReferenceCondition& r = rq.references[k];
        const std::string what =
            "reference " + std::to_string(k + 1) + " (" + reference_kind_name(r.kind) + ")";
        if (r.kind != ReferenceKind::kAudio) {
            const Tensor& z = r.latents;
            if (!z.defined() || z.rank() != 5 || z.dim(0) != 1 || z.dim(1) != channels || z.dim(2) < 1)
                return invalid_argument(what + " latents must be [1, " + std::to_string(channels) +
                                        ", T, h, w], got " + (z.defined() ? z.describe() : "none"));
            H3_ASSIGN_OR_RETURN(Tensor rows, noised_rows(z, what + " latents"));
            cond.push_back(std::move(rows));
        } else if (!r.audio_rows.defined()) {
            return invalid_argument(what + " has no audio rows");
        }
        if (r.audio_rows.defined()) {
            const Tensor& a = r.audio_rows;
            if (a.rank() != 2 || a.dim(1) != audio_latent_channels || a.dim(0) < audio_channels ||
                a.dim(0) % audio_channels)
                return invalid_argument(what + " audio rows must be [" + std::to_string(audio_channels) +
                                        "·A, " + std::to_string(audio_latent_channels) + "], got " +
                                        a.describe());
            H3_ASSIGN_OR_RETURN(Tensor rows, host_f32(a));
            cond_audio.push_back(std::move(rows));
        }
    }
    if (!cond_audio.empty()) out.condition_audio_rows = concat_rows(cond_audio);
    if (!cond.empty()) out.condition_rows = concat_rows(cond);

    if (rq.video_noise) {
        H3_TRY(expect_shape(*rq.video_noise, video_shape, "video noise"));
        H3_ASSIGN_OR_RETURN(out.video_noise, host_f32(*rq.video_noise));
    } else {
        out.video_noise = Tensor::host(video_shape, DType::kF32);
        gen.randn(out.video_noise.data_as<float>(), static_cast<size_t>(out.video_noise.numel()));
    }
    out.video_rows = patchify_video(out.video_noise, ph, pw);

    const Shape audio_shape{audio_channels, audio_latent_channels, g.audio_latents};
    if (rq.audio_noise) {
        H3_TRY(expect_shape(*rq.audio_noise, audio_shape, "audio noise"));
        H3_ASSIGN_OR_RETURN(out.audio_noise, host_f32(*rq.audio_noise));
        out.audio_rows = audio_to_rows(out.audio_noise);
    } else {
        out.audio_rows =
            Tensor::host(Shape{audio_channels * g.audio_latents, audio_latent_channels}, DType::kF32);
        gen.randn(out.audio_rows.data_as<float>(), static_cast<size_t>(out.audio_rows.numel()));
        out.audio_noise = rows_to_audio(out.audio_rows, g.audio_latents);
    }
    return out;
}

} // namespace h3::pipeline
