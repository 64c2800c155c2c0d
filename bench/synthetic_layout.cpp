#include "bench/synthetic_layout.h"

#include <cmath>
#include <cstdio>

namespace h3::bench {

std::string release_size() {
    return std::to_string(kReleaseWidth) + "x" + std::to_string(kReleaseHeight);
}

Result<model::SyntheticLayout> synthetic_layout(const std::string& size, int frames, int64_t text_rows) {
    int W = 0, H = 0;
    if (std::sscanf(size.c_str(), "%dx%d", &W, &H) != 2 || W <= 0 || H <= 0 || W % 32 || H % 32)
        return invalid_argument("--size '" + size + "' must be WxH with multiples of 32");
    if (frames < 5 || (frames - 5) % 17)
        return invalid_argument("--frames " + std::to_string(frames) + " must be 17n+5 (e.g. 124)");
    model::SyntheticLayout layout;
    layout.text = text_rows;
    layout.latent_frames = (frames - 5) / 17 * 5 + 2;
    layout.latent_h = H / 16;
    layout.latent_w = W / 16;
    layout.audio = static_cast<int64_t>(std::nearbyint(frames / 24.0 * 40.0)); // round-half-even
    return layout;
}

} // namespace h3::bench
