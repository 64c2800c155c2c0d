// Peak rates the benches state bounds against, and the roofline bound of a piece of work. The figures are
// NVIDIA's H100 SXM5 datasheet (H100 Tensor Core GPU datasheet, 2023): 989 TFLOP/s dense FP16/BF16 tensor
// (1,979 with 2:4 sparsity), 1,979 TFLOP/s dense FP8 (3,958 sparse), 3.35 TB/s HBM3. An H200 has the same
// tensor rates and 4.8 TB/s.
#pragma once

#include <algorithm>

namespace h3::bench {

inline constexpr double kH100DenseF16Tflops = 989.0;   // dense FP16/BF16 tensor cores, fp32 accumulate
inline constexpr double kH100DenseE4m3Tflops = 1979.0; // dense FP8 (e4m3) tensor cores
inline constexpr double kH100HbmTbPerS = 3.35;         // HBM3 bandwidth

// The least time some work can take on a device with the given peaks: its FLOPs at their rates (each part
// at the rate of the units it runs on) or its bytes at the memory bandwidth, whichever is longer.
struct RooflineBound {
    double compute_s = 0, memory_s = 0;
    double seconds() const { return std::max(compute_s, memory_s); }
};
inline RooflineBound roofline_bound(double f16_flops, double e4m3_flops, double bytes,
                                    double f16_tflops = kH100DenseF16Tflops,
                                    double e4m3_tflops = kH100DenseE4m3Tflops,
                                    double hbm_tb_per_s = kH100HbmTbPerS) {
    return {.compute_s = f16_flops / (f16_tflops * 1e12) + e4m3_flops / (e4m3_tflops * 1e12),
            .memory_s = bytes / (hbm_tb_per_s * 1e12)};
}

} // namespace h3::bench
