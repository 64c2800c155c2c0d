// `h3-engine compare A B`: loads two outputs of the same kind, pairs them and measures B against the
// reference A (metrics in quality_metrics.h).
//
// Kinds, told from the file's first bytes (the extension is not trusted):
//   audio    RIFF/WAVE files (read_wav; PCM16 as x / 32767)
//   latents  safetensors (the `generate --save-latents` format; every floating tensor both files hold)
//   video    anything else FFmpeg demuxes (MP4, MKV, MOV, …): the video stream and, when both files have
//            one, the audio stream
// Pairing rules:
//   - different kinds, different frame sizes, audio channel counts or sample rates, or a latent tensor
//     whose shape differs: invalid_argument naming both files and the mismatch;
//   - different frame counts or audio lengths: the common prefix is compared and a warning says so;
//   - different frame rates, audio in only one video file, tensors in only one latents file, non-float
//     tensors: a warning.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "pipeline/quality_metrics.h"

#include <optional>
#include <string>
#include <vector>

namespace h3::pipeline {

enum class CompareKind { kVideo, kAudio, kLatents };
const char* compare_kind_name(CompareKind kind); // "video", "audio", "latents"
// not_found for a missing file, bad_input for an empty one or a directory.
Result<CompareKind> detect_compare_kind(const std::string& path);

struct VideoComparison {
    int64_t frames = 0; // compared (the common prefix)
    int64_t frames_a = 0, frames_b = 0;
    int width = 0, height = 0;
    double fps_a = 0.0, fps_b = 0.0; // 0 when unknown (raw tensors)
    std::vector<double> psnr, ssim;  // per compared frame; psnr is +inf for identical frames
    double psnr_mean = 0.0;          // over the frames with a finite PSNR; +inf when every frame is identical
    double psnr_of_mean_mse = 0.0;   // PSNR of the MSE averaged over all compared frames
    double ssim_mean = 0.0;
    double psnr_min = 0.0, ssim_min = 0.0;
    int64_t psnr_min_frame = 0, ssim_min_frame = 0;
    int64_t identical_frames = 0;
};

struct AudioComparison {
    int channels = 0, sample_rate = 0;
    int64_t samples = 0; // compared per channel (the common prefix)
    int64_t samples_a = 0, samples_b = 0;
    std::vector<SignalMetrics> per_channel;
    SignalMetrics overall; // every compared sample of every channel
};

struct TensorComparison {
    std::string name;
    std::vector<int64_t> shape;
    SignalMetrics metrics;
};
struct LatentsComparison {
    std::vector<TensorComparison> tensors; // in A's header order
    std::vector<std::string> only_in_a, only_in_b;
};

struct CompareReport {
    CompareKind kind = CompareKind::kVideo;
    std::string a, b;
    std::optional<VideoComparison> video;
    std::optional<AudioComparison> audio;
    std::optional<LatentsComparison> latents;
    std::vector<std::string> warnings;
};

struct CompareOptions {
    int threads = 0; // SSIM threads over frames (0: the hardware's count)
};

Result<CompareReport> compare_files(const std::string& a, const std::string& b,
                                    const CompareOptions& options = {});

// The pairing on tensors. `a_name`/`b_name` label the inputs in errors and warnings.
// frames: [F, H, W, 3] u8; audio: [C, N] f32.
Result<VideoComparison> compare_video(const Tensor& a, const Tensor& b, const std::string& a_name,
                                      const std::string& b_name, std::vector<std::string>* warnings,
                                      int threads = 0);
Result<AudioComparison> compare_audio(const Tensor& a, int rate_a, const Tensor& b, int rate_b,
                                      const std::string& a_name, const std::string& b_name,
                                      std::vector<std::string>* warnings);

} // namespace h3::pipeline
