// torch's float32 linspace on the CPU, reproduced bit for bit (the sampler's sigma grid).
#pragma once

#include <vector>

namespace h3 {

// torch.linspace(start, end, steps, dtype=float32) on the CPU as torch 2.x computes it (aten/src/ATen/native/
// cpu/RangeFactoriesKernel.cpp, scalar since pytorch#89048): step = (end − start) / (steps − 1) in fp32, then
// element by element start + step·i below steps/2 and end − step·(steps − 1 − i) from there on. ATen's CPU
// kernels are built per capability with GCC in GNU mode (-ffp-contract=fast); the AVX2 and AVX-512 builds
// (-mfma) contract each element into one fma: fma(step, i, start) / fma(−step, steps − 1 − i, end), which is
// what `fused = true` gives. `fused = false` is the DEFAULT build (ATEN_CPU_CAPABILITY=default, or a CPU
// without AVX2), where the product rounds before the sum. steps == 1 gives {start}; steps <= 0 nothing.
// torch 1.13 vectorized this kernel (base + j·step inside each vector of 8); its grid differs from steps = 16
// on and is not reproduced: the official pipeline runs torch 2.x.
std::vector<float> torch_linspace_f32(float start, float end, int steps, bool fused = true);

} // namespace h3
