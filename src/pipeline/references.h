// ref2va references (spec §1, §3, §8.2; diffusers MiniMaxH3Ref2VASetupStep and references.py): decoded media
// in request order, the request rules, and the normalization onto the model's own rates and resolutions.
//   - rules (diffusers' check_inputs and reference preparation, nothing beyond): ≥ 1 reference; ≤ 9 images,
//     ≤ 3 videos, ≤ 3 audio clips, ≤ 12 in all; audio never alone; images within 1:4..4:1; video frames RGB
//     at a positive rate, at least one frame left on the 24 fps grid; audio mono or stereo at a positive
//     rate. Clip lengths are not rules: a longer clip is cut to the generated length and a short one is used
//     whole (the VAE encoder pads it, as diffusers' does);
//   - image: resized (PIL LANCZOS, upscaling included) to a 2048-px short edge, each side rounded half-even
//     to a multiple of 32, no area cap; aspect within [1/4, 4];
//   - video: onto 24 fps by whole-frame drop/duplicate (ffmpeg's fps filter: source frame i lands on slot
//     floor(i·24/fps + 0.5), the stream end on floor(n·24/fps + 0.5)), cut to the target's frame count, then
//     resized (PIL LANCZOS) to the 768-short-edge canvas of its own aspect (the target's canvas rule);
//   - soundtrack / audio: cut at int(F/24 · rate) samples at its own rate, mono repeated to stereo, then
//     resampled once to the audio VAE's rate (torchaudio's sinc_interp_hann, pipeline/audio_resample).
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "io/image_reader.h"
#include "pipeline/conditioner.h"
#include "pipeline/geometry.h"

#include <string>
#include <vector>

namespace h3::pipeline {

// One decoded reference.
struct ReferenceMedia {
    ReferenceKind kind = ReferenceKind::kImage;
    std::string source;     // for messages: the file name or upload field
    io::RgbImage image;     // kImage (RGB, EXIF-transposed)
    Tensor frames;          // kVideo: [F, H, W, 3] u8 RGB
    double fps = 24.0;      // kVideo: the rate `frames` carries
    Tensor audio;           // kAudio, or a video's soundtrack (undefined: none): [C, N] f32, C = 1 or 2
    int sample_rate = 0;    // of `audio`
    bool truncated = false; // the reader stopped early (past the longest generated clip: nothing lost)
    bool has_audio() const { return kind == ReferenceKind::kAudio || audio.defined(); }
    double clip_seconds() const; // video: F/fps; audio: N/rate; image: 0
};

struct ReferenceLimits {
    int max_images = 9, max_videos = 3, max_audios = 3, max_references = 12;
};

// Every rule the request breaks is reported in one invalid_argument naming the references concerned.
Status validate_references(const std::vector<ReferenceMedia>& references, const ReferenceLimits& limits = {});

// A reference on the model's rates and resolutions.
struct NormalizedReference {
    ReferenceKind kind = ReferenceKind::kImage;
    std::string source;
    io::RgbImage image; // kImage: 2048-px short edge
    Tensor frames;      // kVideo: [F', H', W', 3] u8 at 24 fps, F' ≤ the target's frames, its own canvas
    Tensor audio;       // has_audio(): [2, N'] f32 at the audio VAE's rate
    bool has_audio() const { return audio.defined(); }
};

struct NormalizeOptions {
    int num_frames = 124;   // the target's aligned frame count (17n+5)
    model::LatentSpec spec; // the checkpoint's: canvas multiple, audio VAE sampling rate
    // The reference resolutions: the released model's 2048-px image short edge (diffusers' Ref2VA setup step
    // takes it as `reference_image_short_edge`) and the 768-px canvas rule for videos. Smaller values are a
    // reduced-cost mode (tests on the CPU, small GPUs); they change what the model sees.
    int image_short_edge = kReferenceImageEdge;
    int video_short_edge = kCanvasShortEdge;
};

Result<std::vector<NormalizedReference>> normalize_references(const std::vector<ReferenceMedia>& references,
                                                              const NormalizeOptions& options);

// The pieces, exposed for tests. Sides are multiples of `multiple` (LatentSpec::canvas_multiple).
Result<Canvas> reference_image_size(int width, int height, int short_edge, int multiple);
// Source frame index of every 24 fps output frame.
std::vector<int64_t> resample_to_24fps(int64_t frames, double fps);

// What the conditioner sees of a normalized video (diffusers sample_reference_video_frames): every 12th frame
// (2 fps), deduplicated; the sampled frames pair up (last repeated when odd) and each pair's label is the
// mean of the pair's timestamps k/2.
struct ConditionerFrames {
    std::vector<int64_t> indices;
    std::vector<double> block_timestamps;
};
ConditionerFrames sample_conditioner_frames(int64_t frames, double fps = 24.0, double sample_fps = 2.0,
                                            int temporal_patch = 2);

// The frames the video VAE encodes of a reference video: LatentSpec::align_frames_down (17n+5, at least 22).

} // namespace h3::pipeline
