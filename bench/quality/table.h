// `bench quality`'s measurements of one setting against the lossless reference, summed over the prompt
// set, and their rendering: the markdown table (the README's format) and the --json document.
//
// Video: on the decoded 8-bit RGB frames (before any encoder), every frame of every case. PSNR is
// 10·log10(255² / MSE) with the MSE over every R, G, B value of every frame (= the PSNR of the mean
// per-frame MSE; +inf when every frame is identical), plus the worst frame's PSNR; SSIM is
// pipeline::ssim_rgb's (skimage's Gaussian-window SSIM: 11×11, σ = 1.5, K1 0.01, K2 0.03, valid region,
// channels averaged), its mean over the frames and the worst frame. Audio: the decoded waveforms (both
// channels, every case) as one signal: SNR 10·log10(ΣA²/Σ(A−B)²) and cosine. Work: DiT block evaluations
// from the engine's work counters (cache::WorkReport), the speedup being the reference's count over the
// setting's; wall: the denoising steps' seconds (Σ per-step seconds: the forwards and Euler updates, the
// DiT's load and request setup excluded) and the whole request's seconds.
#pragma once

#include "cache/work.h"
#include "core/status.h"
#include "core/tensor.h"
#include "pipeline/quality_metrics.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace h3::bench {

// What one case's run gave (the reference's or a setting's).
struct CaseRun {
    std::string name;
    Tensor frames; // [F, H, W, 3] u8
    Tensor audio;  // [C, N] f32
    int64_t blocks = 0, dit_calls = 0, cache_hits = 0;
    double step_seconds = 0, total_seconds = 0;
};

// A setting's case against the reference's case.
struct CaseComparison {
    std::string name;
    int64_t frames = 0, identical_frames = 0;
    int64_t values_per_frame = 0;        // H·W·3
    double sum_sq_err = 0, ssim_sum = 0; // over every value / frame (what the row sums)
    double psnr = 0, psnr_min = 0, ssim_mean = 0, ssim_min = 0; // psnr: of the MSE over all frames
    pipeline::SignalAccumulator audio_sums;
    pipeline::SignalMetrics audio;
    int64_t blocks = 0, dit_calls = 0, cache_hits = 0;
    double step_seconds = 0, total_seconds = 0;
};

enum class RowStatus { kMeasured, kNotApplicable, kUnsupported, kFailed };
const char* row_status_name(RowStatus s); // measured, not_applicable, unsupported, failed

struct QualityRow {
    std::string name = {}, group = {}, flags = {};
    RowStatus status = RowStatus::kMeasured;
    std::string reason = {}; // why it was not measured
    std::vector<CaseComparison> cases = {};
    // Over every case.
    int64_t frames = 0, identical_frames = 0;
    double psnr = 0, psnr_min = 0, ssim_mean = 0, ssim_min = 0;
    pipeline::SignalMetrics audio = {};
    int64_t blocks = 0, dit_calls = 0, cache_hits = 0;
    double step_seconds = 0, total_seconds = 0;
    double work_speedup = 0, wall_speedup = 0; // the reference's blocks / step seconds over this row's
};

// One case of a setting against the same case of the reference: same frame and waveform shapes, or an
// internal error naming the case (the same request decodes to the same shapes).
Result<CaseComparison> compare_case(const CaseRun& reference, const CaseRun& run, int threads = 0);

// The row of a measured setting: its cases summed (pixels, samples, counters, seconds) against the
// reference's totals.
QualityRow measured_row(std::string name, std::string group, std::string flags,
                        std::vector<CaseComparison> cases, int64_t reference_blocks,
                        double reference_step_seconds);

struct QualityHeader {
    std::string model; // the checkpoint root
    bool tiny = false; // the random make-tiny checkpoint (numbers say nothing about quality)
    std::string device, dtype;
    std::string geometry;           // "64x64, 107 frames (4.458 s), ..."
    std::string schedule;           // "10 grid points (9 forwards)" or the rungs
    std::vector<std::string> cases; // "ball (t2va, seed 1): a red ball ..."
    int64_t reference_blocks = 0;
    double reference_step_seconds = 0, reference_total_seconds = 0;
};

// The markdown: a line per header fact, the table (| setting | flags | PSNR dB | min PSNR | SSIM | min SSIM |
// audio SNR dB | audio cos | blocks | work × | steps s | wall × |), then a line per row not measured.
std::string quality_markdown(const QualityHeader& header, const std::vector<QualityRow>& rows);
// {"bench": "quality", "model", "tiny", "device", "dtype", "geometry", "schedule", "cases",
//  "reference": {...}, "settings": [{name, group, flags, status, reason, video, audio, work, seconds,
//  cases: [...]}]}; +inf is "inf", NaN null (compare --json's convention).
nlohmann::ordered_json quality_json(const QualityHeader& header, const std::vector<QualityRow>& rows);

} // namespace h3::bench
