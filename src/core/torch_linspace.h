// torch's float32 linspace, reproduced bit for bit (the sampler's sigma grid, the vision tower's position
// interpolation).
#pragma once

#include <vector>

namespace h3 {

// torch.linspace(start, end, steps, dtype=float32) on the CPU. torch's kernel writes vectors of 8 from a
// base fma(step, idx, start) (fma(−step, steps−1−idx, end) past the midpoint) plus base + j·step, and the
// remainder (< 16) with the per-element fma. `fused = false` is the build without FMA
// (ATEN_CPU_CAPABILITY=default), where every product rounds.
std::vector<float> torch_linspace_f32(float start, float end, int steps, bool fused = true);

} // namespace h3
