// torchaudio's band-limited sinc resampler (resampling_method "sinc_interp_hann", lowpass_filter_width 6,
// rolloff 0.99), reproduced to the kernel's last bit: the rates are reduced by their gcd (orig', new'), the
// kernel holds new' phases of 2·width + orig' taps with width = ceil(6·orig' / (min(orig', new')·0.99)), the
// signal is zero-padded by (width, width + orig'), each phase is a strided dot product (stride orig'), the
// phases are interleaved and the result cut to ceil(new'·N / orig') samples.
//
// The kernel's precision follows the torchaudio entry point being reproduced (tools/reference/
// audio_resample_reference.py documents both):
//   kTransform   `torchaudio.transforms.Resample(orig, new)` — what the diffusers MiniMax-H3 pipeline runs on
//                reference soundtracks: float64 math (except −j/new, which torch computes in float32 from an
//                int64 arange), cached as float32;
//   kFunctional  `torchaudio.functional.resample(waveform_f32, orig, new)` — the kernel computed in float32.
// The two differ by up to ~2e-5 on 44.1/22.05 kHz input. The dot products accumulate in double (torch's fp32
// convolution differs from that by ≲ 2e-7 on signals in [−1, 1]).
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <vector>

namespace h3::pipeline {

enum class ResampleKernel { kTransform, kFunctional };

struct ResampleOptions {
    int lowpass_filter_width = 6;
    double rolloff = 0.99;
    ResampleKernel kernel = ResampleKernel::kTransform;
    // Refuse rate pairs whose kernel (phases × taps after the gcd reduction) would exceed this many values.
    int64_t max_kernel_values = int64_t{1} << 24;
};

// waveform [C, N] f32 on the host (C ≥ 1, N ≥ 0) → [C, ceil(new_rate·N / orig_rate)] f32 on the host. Equal
// rates return a copy. Rates must be positive (invalid_argument naming the rate).
Result<Tensor> resample_audio(const Tensor& waveform, int orig_rate, int new_rate,
                              const ResampleOptions& options = {});

// The kernel itself: [new', 2·width + orig'] row-major, and width (tests; the goldens carry some kernels).
struct SincKernel {
    int64_t orig = 0, next = 0, width = 0, taps = 0; // rates after the gcd reduction; taps = 2·width + orig
    std::vector<float> values;                       // [next][taps]
};
Result<SincKernel> sinc_resample_kernel(int orig_rate, int new_rate, const ResampleOptions& options = {});

} // namespace h3::pipeline
