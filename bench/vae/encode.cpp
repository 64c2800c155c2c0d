#include "bench/vae/options.h"
#include "core/cuda_api.h"
#include "model/video_vae/video_vae_encoder.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

namespace h3::bench {

namespace {
using Clock = std::chrono::steady_clock;
} // namespace

// bench vae --encode: the video encoder (fp32, random weights made on the device) over one RGB8 keyframe of
// --size, tiled like the reference (256-px tiles, min overlap 64), after one warm-up encode.
int run_vae_encode_bench(const VaeBenchOptions& o) {
    model::VideoVaeConfig vc;
    int W = 0, H = 0;
    if (Status s = vae_bench_setup(o, vc, W, H); !s.ok()) return report(s);
    auto session = DeviceSession::open(o.device);
    if (!session.ok()) return report(session.status());
    const ops::Context& ctx = (*session)->context();
    auto enc = model::random_video_vae_encoder(ctx, vc, 1);
    if (!enc.ok()) return report(enc.status());
    Tensor img = Tensor::host(Shape{H, W, 3}, DType::kU8);
    for (int64_t i = 0; i < img.numel(); ++i)
        img.data_as<uint8_t>()[i] = static_cast<uint8_t>((i * 31) % 256);
    const model::VideoEncodeOptions eo{.tile_batch = o.tile_batch, .tf32 = !o.exact_fp32};
    if (auto r = model::encode_keyframe(ctx, *enc, img, eo); !r.ok()) return report(r.status()); // warm-up
    const auto t0 = Clock::now();
    auto lat = model::encode_keyframe(ctx, *enc, img, eo);
    if (!lat.ok()) return report(lat.status());
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const int tiles =
        static_cast<int>(model::split_tiles(H, eo.tile, eo.min_overlap, vc.patch).starts.size() *
                         model::split_tiles(W, eo.tile, eo.min_overlap, vc.patch).starts.size());
    const double peak = static_cast<double>(device_memory_stats().peak) / (1ull << 30);
    nlohmann::json j = {{"bench", "vae_encode"},
                        {"device", ctx.device.to_string()},
                        {"size", o.size},
                        {"tiles", tiles},
                        {"keyframe_encode_seconds", secs},
                        {"peak_gib", peak},
                        {"latent", lat->shape().to_vector()}};
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("VAE encode bench on %s, %s keyframe (%d tiles): %.3f s, peak %.1f GiB\n",
                    ctx.device.to_string().c_str(), o.size.c_str(), tiles, secs, peak);
    }
    return kExitOk;
}

} // namespace h3::bench
