#include "core/torch_linspace.h"

#include <cmath>

namespace h3 {

std::vector<float> torch_linspace_f32(float start, float end, int steps, bool fused) {
    std::vector<float> out;
    if (steps <= 0) return out;
    if (steps == 1) return {start};
    out.resize(static_cast<size_t>(steps));
    // scalar_t step = (end - start) / (steps - 1): the int64 divisor converts to float exactly.
    const float step = (end - start) / static_cast<float>(steps - 1);
    const int halfway = steps / 2;
    for (int i = 0; i < steps; ++i) {
        // The index converts to float exactly (steps < 2^24 in every use).
        if (i < halfway) {
            const float k = static_cast<float>(i);
            out[static_cast<size_t>(i)] = fused ? std::fma(step, k, start) : start + step * k;
        } else {
            const float k = static_cast<float>(steps - i - 1);
            out[static_cast<size_t>(i)] = fused ? std::fma(-step, k, end) : end - step * k;
        }
    }
    return out;
}

} // namespace h3
