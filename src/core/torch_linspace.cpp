#include "core/torch_linspace.h"

#include <cmath>

namespace h3 {

std::vector<float> torch_linspace_f32(float start, float end, int steps, bool fused) {
    std::vector<float> out;
    if (steps <= 0) return out;
    if (steps == 1) return {start};
    out.resize(static_cast<size_t>(steps));
    const float step = (end - start) / static_cast<float>(steps - 1);
    const int halfway = steps / 2;
    auto base_at = [&](int idx) -> float {
        if (idx < halfway) {
            const float i = static_cast<float>(idx);
            return fused ? std::fma(step, i, start) : start + step * i;
        }
        const float k = static_cast<float>(steps - idx - 1);
        return fused ? std::fma(-step, k, end) : end - step * k;
    };
    constexpr int kVec = 8;
    int i = 0;
    // Two vectors per iteration, as in aten's vectorized_loop; the tail (< 16) goes element by element.
    for (; i <= steps - 2 * kVec; i += 2 * kVec)
        for (int v = i; v < i + 2 * kVec; v += kVec) {
            const float base = base_at(v);
            out[static_cast<size_t>(v)] = base;
            for (int j = 1; j < kVec; ++j)
                out[static_cast<size_t>(v + j)] = base + static_cast<float>(j) * step;
        }
    for (; i < steps; ++i) out[static_cast<size_t>(i)] = base_at(i);
    return out;
}

} // namespace h3
