#include "pipeline/schedule.h"

#include "ops/sampling.h"

#include <cmath>
#include <string>

namespace h3::pipeline {

namespace {

// σ' = s·u / (1 + (s−1)·u) in fp32 over the grid u, consecutive duplicates removed.
Schedule shifted(const std::vector<float>& u, double shift) {
    const float s = static_cast<float>(shift);
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

Status check_shift(double shift) {
    if (!(shift > 0) || !std::isfinite(shift))
        return invalid_argument("scheduler shift " + std::to_string(shift) + " must be positive");
    return ok_status();
}

} // namespace

Result<Schedule> make_schedule(int n, double shift) {
    if (n < 2 || n > 10000)
        return invalid_argument("steps " + std::to_string(n) +
                                " must lie in [2, 10000] (grid points, terminal 0 included: N points run N-1 "
                                "forwards)");
    H3_TRY(check_shift(shift));
    return shifted(torch_linspace_f32(1.0f, 0.0f, n), shift);
}

Result<Schedule> make_rung_schedule(const std::vector<int>& rungs, double shift) {
    if (rungs.empty()) return invalid_argument("rung schedule: no rungs");
    for (size_t i = 0; i < rungs.size(); ++i)
        if (rungs[i] <= 0 || rungs[i] > 1000 || (i && rungs[i] >= rungs[i - 1]))
            return invalid_argument("rung schedule: rungs must be strictly decreasing integers in (0, 1000], "
                                    "got " +
                                    std::to_string(rungs[i]) + " at position " + std::to_string(i));
    H3_TRY(check_shift(shift));
    std::vector<float> u;
    for (int r : rungs) u.push_back(static_cast<float>(r) / 1000.0f);
    u.push_back(0.0f);
    Schedule sc = shifted(u, shift);
    if (sc.forwards() != static_cast<int>(rungs.size()))
        return invalid_argument("rung schedule: two rungs give the same sigma at shift " +
                                std::to_string(shift));
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

Result<DualSchedule> make_dual_rung_schedule(const std::vector<int>& rungs, double video_shift,
                                             double audio_shift) {
    DualSchedule d;
    auto v = make_rung_schedule(rungs, video_shift);
    if (!v.ok()) return v.status().with_context("video schedule");
    auto a = make_rung_schedule(rungs, audio_shift);
    if (!a.ok()) return a.status().with_context("audio schedule");
    d.video = std::move(v).value();
    d.audio = std::move(a).value();
    return d;
}

void euler_update(float* x, const float* v, size_t n, float timestep, float sigma, float sigma_next) {
    const float sigma_t = 1.0f - timestep;
    const float ratio = sigma_next / sigma;
    const float one_minus = 1.0f - ratio;
    for (size_t i = 0; i < n; ++i) x[i] = ops::euler_step(x[i], v[i], sigma_t, ratio, one_minus);
}

} // namespace h3::pipeline
