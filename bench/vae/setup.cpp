#include "bench/vae/options.h"

#include <cstdio>

namespace h3::bench {

Status vae_bench_setup(const VaeBenchOptions& o, model::VideoVaeConfig& vc, int& W, int& H) {
    vc = model::VideoVaeConfig{};
    vc.latents_mean.assign(static_cast<size_t>(vc.latent_channels), 0.0f);
    vc.latents_std.assign(static_cast<size_t>(vc.latent_channels), 1.0f);
    if (o.config != "official") {
        auto r = model::VideoVaeConfig::from_file(o.config);
        if (!r.ok()) return r.status();
        vc = *r;
    }
    if (std::sscanf(o.size.c_str(), "%dx%d", &W, &H) != 2 || W <= 0 || H <= 0 || W % vc.patch || H % vc.patch)
        return invalid_argument("--size '" + o.size + "' must be WxH with multiples of " +
                                std::to_string(vc.patch));
    return ok_status();
}

} // namespace h3::bench
