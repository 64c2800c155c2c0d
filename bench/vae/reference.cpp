#include "bench/device_report.h"
#include "bench/vae/options.h"
#include "core/cuda_api.h"
#include "model/audio_vae/audio_vae.h"
#include "model/audio_vae/audio_vae_encoder.h"
#include "model/video_vae/video_vae_encoder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace h3::bench {

namespace {
using Clock = std::chrono::steady_clock;
} // namespace

// bench vae --reference: the ref2va reference encoders (fp32, random weights made on the device) — a --frames
// clip of --size through the video encoder with the seeded-sample recipe, then its soundtrack (stereo,
// frames/24 s at 32 kHz) through the audio encoder (posterior mean) — after one warm-up keyframe encode.
int run_vae_reference_bench(const VaeBenchOptions& o) {
    model::VideoVaeConfig vc;
    int W = 0, H = 0;
    if (Status s = vae_bench_setup(o, vc, W, H); !s.ok()) return report(s);
    if (o.frames < 1 || (o.frames - 5) % 17 != 0)
        return report(invalid_argument("--frames must be of the form 17n+5 for a reference clip"));
    auto session = DeviceSession::open(o.device);
    if (!session.ok()) return report(session.status());
    const ops::Context& ctx = (*session)->context();
    double video_secs = 0, video_peak = 0;
    Tensor lat;
    { // the video encoder is released before the audio one loads
        auto enc = model::random_video_vae_encoder(ctx, vc, 1);
        if (!enc.ok()) return report(enc.status());
        Tensor clip = Tensor::host(Shape{o.frames, H, W, 3}, DType::kU8);
        for (int64_t i = 0; i < clip.numel(); ++i)
            clip.data_as<uint8_t>()[i] = static_cast<uint8_t>((i * 31 + i / (int64_t(W) * H * 3)) % 256);
        const model::VideoEncodeOptions eo{.tile_batch = o.tile_batch, .tf32 = !o.exact_fp32};
        Tensor first = Tensor::host(Shape{H, W, 3}, DType::kU8);
        std::copy_n(clip.data_as<uint8_t>(), first.numel(), first.data_as<uint8_t>());
        if (auto r = model::encode_keyframe(ctx, *enc, first, eo); !r.ok())
            return report(r.status()); // warm-up
        const auto t0 = Clock::now();
        auto post = model::encode_video(ctx, *enc, clip, eo);
        if (!post.ok()) return report(post.status());
        lat = model::sample_normalized_latent(*post, vc, 42);
        video_secs = std::chrono::duration<double>(Clock::now() - t0).count();
        video_peak = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
    }
    model::AudioVaeConfig ac; // official sizes, unit latent normalization
    ac.latents_mean.assign(static_cast<size_t>(ac.latent_channels), 0.0f);
    ac.latents_std.assign(static_cast<size_t>(ac.latent_channels), 1.0f);
    auto aenc = model::random_audio_vae_encoder(ctx, ac, 2);
    if (!aenc.ok()) return report(aenc.status());
    const int64_t samples = static_cast<int64_t>(std::llround(o.frames / 24.0 * ac.sampling_rate));
    Tensor wave = Tensor::host(Shape{2, samples}, DType::kF32);
    for (int64_t i = 0; i < wave.numel(); ++i)
        wave.data_as<float>()[i] = 0.5f * std::sin(0.0123f * static_cast<float>(i % 100003));
    if (auto r = model::encode_audio_mean(ctx, *aenc, wave); !r.ok()) return report(r.status()); // warm-up
    const auto t1 = Clock::now();
    auto mean = model::encode_audio_mean(ctx, *aenc, wave);
    if (!mean.ok()) return report(mean.status());
    const double audio_secs = std::chrono::duration<double>(Clock::now() - t1).count();
    nlohmann::json j = {{"bench", "vae_reference"},
                        {"device", ctx.device.to_string()},
                        {"size", o.size},
                        {"frames", o.frames},
                        {"clip_encode_seconds", video_secs},
                        {"tf32", !o.exact_fp32},
                        {"conv3d", conv3d_backend(ctx)},
                        {"clip_latent", lat.shape().to_vector()},
                        {"clip_peak_gib", video_peak},
                        {"soundtrack_seconds", static_cast<double>(samples) / ac.sampling_rate},
                        {"soundtrack_encode_seconds", audio_secs},
                        {"soundtrack_latent", mean->shape().to_vector()}};
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("ref2va reference encode on %s: %d-frame %s clip %.3f s (peak %.1f GiB), %.2f s stereo "
                    "soundtrack %.3f s\n",
                    ctx.device.to_string().c_str(), o.frames, o.size.c_str(), video_secs, video_peak,
                    static_cast<double>(samples) / ac.sampling_rate, audio_secs);
    }
    return kExitOk;
}

} // namespace h3::bench
