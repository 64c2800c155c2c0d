// A CPU random generator that reproduces torch's (torch.Generator("cpu").manual_seed(s) + torch.randn) so a
// seed gives the same noise as the PyTorch reference (spec §3 step 5, §15.10).
//
// What torch does (aten CPUGeneratorImpl, DistributionTemplates.h, avx_mathfun.h):
//  * manual_seed(s) seeds a standard mt19937 with the low 32 bits of s and clears the cached normals.
//  * float uniform = (random() & (2^24−1))·2^-24; double uniform = (random64() & (2^53−1))·2^-53, where
//    random64() = first 32-bit draw << 32 | second.
//  * randn over a contiguous fp32 tensor of ≥ 16 elements: fill every element with a float uniform first,
//    then Box–Muller in place over blocks of 16 (pairs j, j+8); when the size is not a multiple of 16 the
//    last 16 elements are redrawn and transformed again. On x86 with AVX2 (and on AVX-512 machines, which
//    torch does not dispatch normal_ to) the transform is avx_mathfun's Cephes log/sincos in fp32 with the
//    multiply-adds GCC contracts into FMAs; without AVX2 it is the scalar libm path (log in float, cos/sin
//    in double).
//  * fewer than 16 elements: one double Box–Muller per element (normal_distribution<double>), which caches
//    the second value of every pair in the generator for the next draw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>

namespace h3 {

enum class TorchNormalKernel {
    kAvx2,   // torch's default on x86-64 machines with AVX2 (what the reference goldens use)
    kScalar, // ATEN_CPU_CAPABILITY=default, or CPUs without AVX2
};

class TorchGenerator {
public:
    explicit TorchGenerator(uint64_t seed = 67280421310721ull,
                            TorchNormalKernel kernel = TorchNormalKernel::kAvx2);
    void manual_seed(uint64_t seed);
    uint64_t seed() const { return seed_; }

    uint32_t random() { return engine_(); }
    uint64_t random64();
    float uniform_float();   // [0, 1), 24 bits
    double uniform_double(); // [0, 1), 53 bits

    // torch.randn(n, generator=this) for a contiguous fp32 tensor of n elements.
    void randn(float* out, size_t n);

private:
    double normal_double(); // normal_distribution<double> with the generator-cached second sample
    void normal_fill_16(float* data) const;

    std::mt19937 engine_;
    uint64_t seed_ = 0;
    TorchNormalKernel kernel_;
    std::optional<double> next_double_normal_;
};

} // namespace h3
