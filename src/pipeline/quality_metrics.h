// Quality metrics between a reference A and a candidate B: PSNR and SSIM of RGB frames, and the signal
// statistics (cosine, SNR, RMSE, RMS ratio, relative RMS, max |A−B|) used for audio and latents.
//
// PSNR: 10·log10(255² / MSE) with the MSE over every R, G and B value of the frame; +inf when the frames are
// identical.
// SSIM: Wang et al. 2004 as skimage.metrics.structural_similarity(a, b, gaussian_weights=True, sigma=1.5,
// use_sample_covariance=False, data_range=255, channel_axis=-1) computes it: an 11×11 Gaussian window
// (σ = 1.5, truncated at 3.5σ → radius 5, normalized), population (co)variances, K1 = 0.01, K2 = 0.03, L =
// 255; the SSIM map over the valid region only (the 5-pixel border where the window leaves the image is
// cropped), averaged, per channel, then the three channel means averaged. Frames need H, W >= 11.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

namespace h3::pipeline {

constexpr int kSsimWindow = 11; // 2·int(3.5·1.5 + 0.5) + 1
constexpr double kSsimSigma = 1.5, kSsimK1 = 0.01, kSsimK2 = 0.03, kPixelRange = 255.0;

// Mean of (a − b)² over n bytes.
double mse_u8(const uint8_t* a, const uint8_t* b, int64_t n);
// 10·log10(range² / mse); +inf for mse == 0.
double psnr_from_mse(double mse, double range = kPixelRange);

// SSIM of two interleaved RGB frames (h·w·3 bytes each). `channels` (optional) receives the per-channel
// means. invalid_argument when the frame is smaller than the window.
Result<double> ssim_rgb(const uint8_t* a, const uint8_t* b, int height, int width,
                        std::array<double, 3>* channels = nullptr);

// Per-frame PSNR/SSIM of two [F, H, W, 3] u8 tensors of the same shape, frames spread over `threads`
// threads (0: the hardware's count).
struct FrameMetrics {
    std::vector<double> psnr, ssim, mse;
};
Result<FrameMetrics> frame_metrics(const Tensor& a, const Tensor& b, int threads = 0);

// Statistics of A (reference) against B over paired samples.
struct SignalMetrics {
    int64_t count = 0;
    double cosine = std::numeric_limits<double>::quiet_NaN(); // ΣAB / √(ΣA²·ΣB²); NaN when A or B is all zero
    double snr_db = 0.0; // 10·log10(ΣA² / Σ(A−B)²); +inf when A == B, −inf when A == 0 ≠ B
    double rmse = 0.0;   // √(Σ(A−B)² / n)
    double rms_a = 0.0, rms_b = 0.0;
    double rms_ratio = 0.0;    // rms(B) / rms(A); NaN when both are 0, +inf when only A is
    double rel_rms = 0.0;      // √(Σ(A−B)² / ΣA²) = rmse / rms(A)
    double max_abs_diff = 0.0; // max |A − B|
};

// Accumulates in double; add() may be called per channel or per chunk, then finish().
class SignalAccumulator {
public:
    void add(const float* a, const float* b, int64_t n);
    void merge(const SignalAccumulator& o);
    SignalMetrics finish() const;

private:
    int64_t n_ = 0;
    double aa_ = 0.0, bb_ = 0.0, ab_ = 0.0, dd_ = 0.0, max_abs_ = 0.0;
};

SignalMetrics signal_metrics(const float* a, const float* b, int64_t n);

} // namespace h3::pipeline
