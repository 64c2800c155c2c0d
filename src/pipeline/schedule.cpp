#include "pipeline/schedule.h"

#include "ops/sampling.h"

#include <cmath>
#include <string>

namespace h3::pipeline {

Result<Schedule> make_schedule(int n, double shift) {
    if (n < 2 || n > 10000)
        return invalid_argument("steps " + std::to_string(n) +
                                " must lie in [2, 10000] (grid points, terminal 0 included: N points run N-1 "
                                "forwards)");
    if (!(shift > 0) || !std::isfinite(shift))
        return invalid_argument("scheduler shift " + std::to_string(shift) + " must be positive");
    const float s = static_cast<float>(shift);
    const std::vector<float> u = torch_linspace_f32(1.0f, 0.0f, n);
    Schedule sc;
    sc.shift = shift;
    for (float x : u) {
        const float num = s * x;
        const float den = 1.0f + (s - 1.0f) * x;
        const float sigma = num / den;
        if (sc.sigmas.empty() || sc.sigmas.back() != sigma) sc.sigmas.push_back(sigma);
    }
    for (size_t i = 0; i + 1 < sc.sigmas.size(); ++i) sc.timesteps.push_back(1.0f - sc.sigmas[i]);
    return sc;
}

Result<DualSchedule> make_dual_schedule(int n, double video_shift, double audio_shift) {
    DualSchedule d;
    auto v = make_schedule(n, video_shift);
    if (!v.ok()) return v.status().with_context("video schedule");
    auto a = make_schedule(n, audio_shift);
    if (!a.ok()) return a.status().with_context("audio schedule");
    d.video = std::move(v).value();
    d.audio = std::move(a).value();
    if (d.video.sigmas.size() != d.audio.sigmas.size())
        return invalid_argument("steps " + std::to_string(n) + ": the video (shift " +
                                std::to_string(video_shift) + ") and audio (shift " +
                                std::to_string(audio_shift) + ") grids collapse to different lengths (" +
                                std::to_string(d.video.sigmas.size()) + " vs " +
                                std::to_string(d.audio.sigmas.size()) + "); choose fewer steps");
    return d;
}

void euler_update(float* x, const float* v, size_t n, float timestep, float sigma, float sigma_next) {
    const float sigma_t = 1.0f - timestep;
    const float ratio = sigma_next / sigma;
    const float one_minus = 1.0f - ratio;
    for (size_t i = 0; i < n; ++i) x[i] = ops::euler_step(x[i], v[i], sigma_t, ratio, one_minus);
}

} // namespace h3::pipeline
