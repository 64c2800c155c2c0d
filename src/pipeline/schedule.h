// The dual-shift rectified-flow schedule and its Euler update (spec §7), bit-for-bit in fp32 as the
// reference evaluates them.
#pragma once

#include "core/status.h"
#include "core/torch_linspace.h"

#include <cstddef>
#include <vector>

namespace h3::pipeline {

inline constexpr double kDefaultVideoShift = 12.0;
inline constexpr double kDefaultAudioShift = 3.0;

struct Schedule {
    double shift = 0;
    std::vector<float> sigmas;    // N values, strictly decreasing, ending at 0
    std::vector<float> timesteps; // N−1 values t = 1 − σ fed to the DiT
    int forwards() const { return static_cast<int>(timesteps.size()); }
};

// σ' = s·u / (1 + (s−1)·u) over u = torch.linspace(1, 0, N) in fp32 as torch 2.x computes it on the CPU
// (core/torch_linspace.h; diffusers' MiniMaxH3Scheduler builds the grid there), consecutive duplicates
// removed.
Result<Schedule> make_schedule(int grid_points, double shift);

// A rung schedule (FastH3's few-step students): σ' over u = rung/1000 for the given strictly decreasing rungs
// in (0, 1000], then the terminal 0 — 4 rungs, 4 forwards. Rungs 1000/750/500/250 are exactly the 5-point
// grid of make_schedule.
Result<Schedule> make_rung_schedule(const std::vector<int>& rungs, double shift);

struct DualSchedule {
    Schedule video, audio;
    int forwards() const { return video.forwards(); }
};
// Both grids; they must collapse to the same length (the reference zips them).
Result<DualSchedule> make_dual_schedule(int grid_points, double video_shift = kDefaultVideoShift,
                                        double audio_shift = kDefaultAudioShift);

// Both rung schedules (the video and audio shifts on the same rungs).
Result<DualSchedule> make_dual_rung_schedule(const std::vector<int>& rungs,
                                             double video_shift = kDefaultVideoShift,
                                             double audio_shift = kDefaultAudioShift);

// x ← r·x + (1−r)·(x + (1−t)·v) with r = σ_next/σ, each operation rounded to fp32 like the reference's
// tensor ops (σ for x0 comes from the timestep, the ratio from the grid). ops::euler_update is the same step
// on tensors (host or device; bit-identical).
void euler_update(float* x, const float* v, size_t n, float timestep, float sigma, float sigma_next);

} // namespace h3::pipeline
