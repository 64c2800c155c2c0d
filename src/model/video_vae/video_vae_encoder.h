// Video VAE encoder (`AutoencoderKLMiniMaxH3` encoder, spec §9.1) and the fl2va keyframe recipe (§3 step 4):
// a causal 3-D CNN (3×3×3 convolutions with 2 zero frames in front and spatial padding in the config's
// mode; per-frame GroupNorm + SiLU ResNet blocks with 1×1×1 shortcuts; right/bottom-padded stride-2
// downsamplers), norm_out → SiLU → conv_out → quant_conv → moments (mean | logvar). Temporal clips of
// clip_length frames with token_drop, spatial tiles laid in pixel space and blended in latent space. fp32
// throughout (the reference keeps the encoder in fp32). Model code only calls ops; tiling, clip assembly, the
// posterior and the sampling run on the host over small latent tensors.
#pragma once

#include "core/buffer_pool.h"
#include "model/video_vae/video_vae.h"

#include <atomic>
#include <memory>

namespace h3::model {

struct VaeConv3d {
    Tensor w, b; // [Cout, Cin, k, k, k], [Cout]; w undefined: the layer is absent
};
struct VaeGroupNormWeights {
    Tensor w, b; // [C]
};
struct VaeResnet3d {
    VaeGroupNormWeights norm1, norm2;
    VaeConv3d conv1, conv2, shortcut; // shortcut only when the channel count changes
};
struct VaeDownLevel {
    std::vector<VaeResnet3d> resnets;
    VaeConv3d down; // downsamplers.0.conv, when stride_t·stride_s > 1
    int stride_t = 1, stride_s = 1;
};
struct VideoVaeEncoderWeights {
    VaeConv3d conv_in;
    std::vector<VaeDownLevel> levels;
    VaeGroupNormWeights norm_out;
    VaeConv3d conv_out, quant_conv;
};

struct VideoVaeEncoder {
    VideoVaeConfig config;
    VideoVaeEncoderWeights weights;
    Device device = Device::cpu();
    // The activations of encoder calls, reused while the encoder lives (every tile of a clip has the same
    // shapes: after the first one nothing is allocated or freed); made by the first call, shared by copies.
    mutable std::shared_ptr<BufferPool> buffers;
    // On CUDA: the page-locked host buffer encode_video assembles each clip in, so that a clip reaches the
    // device in one DMA with no staging copy (its tiles are then cut there); grown on demand, shared by
    // copies (one encode_video at a time per encoder, as for `buffers`).
    mutable std::shared_ptr<Storage> clip_staging;
};

// The diffusers names and shapes of every encoder tensor (encoder.*, quant_conv.*), from the config.
std::vector<std::pair<std::string, std::vector<int64_t>>> video_vae_encoder_tensors(const VideoVaeConfig& c);

// `dir` is a vae component folder (config.json + safetensors). Every encoder tensor must be present with the
// shape the config implies; weights are widened to fp32 and placed on `device`.
Result<VideoVaeEncoder> load_video_vae_encoder(const std::string& dir, Device device);
// Random weights of the config's shapes generated where they live (ops::fill_uniform; benches).
Result<VideoVaeEncoder> random_video_vae_encoder(const ops::Context& ctx, const VideoVaeConfig& config,
                                                 uint64_t seed);

struct VideoEncodeOptions {
    int tile = 256;       // pixel tile size (both axes)
    int min_overlap = 64; // minimum pixel overlap
    bool tiling = true;   // false: every clip encoded whole
    int tile_batch = 0; // tiles per encoder call (same shapes only); 0: 1 on the CPU, on CUDA as many as keep
                        // the widest activation under ~1 GiB
    // CUDA: the convolutions on TF32 tensor cores (ops::Context::allow_tf32), as PyTorch runs them by default
    // (torch.backends.cudnn.allow_tf32); false: exact fp32. The CPU is always fp32.
    bool tf32 = true;
    // Checked before every encoder call (each batch of tiles of each clip) and inside it between blocks: once
    // set, the encode stops with kCancelled.
    const std::atomic<bool>* cancel = nullptr;
};

// ImageNet normalization of RGB8 frames [F, H, W, 3] u8 -> [3, F, H, W] f32: (v/255 − mean)/std in fp32.
Tensor normalize_rgb8(const Tensor& frames);

// One encoder call: x [B, in_channels, T, H, W] normalized pixels (host or ctx device, f32) -> moments
// [B, 2·latent, T', h, w] (host f32; quant_conv applied, before the mean/logvar split). `cancel` is read
// before every resnet and downsampling block: once set, the call stops with kCancelled.
Result<Tensor> encode_moments(const ops::Context& ctx, const VideoVaeEncoder& enc, const Tensor& x,
                              const std::atomic<bool>* cancel = nullptr);
// One temporal clip x [in_channels, T, H, W] (host f32) -> moments [2·latent, T', h, w], spatially tiled per
// `options` (the reference's `_encode_clip`).
Result<Tensor> encode_clip_moments(const ops::Context& ctx, const VideoVaeEncoder& enc, const Tensor& x,
                                   const VideoEncodeOptions& options = {});

// The posterior (DiagonalGaussianDistribution): host f32 [1, latent, T', h, w].
struct VideoPosterior {
    Tensor mean, std; // std = exp(clamp(logvar, −30, 20) / 2)
};
VideoPosterior posterior_from_moments(const Tensor& moments); // moments [2·latent, T', h, w] (host f32)

// A video or image through the encoder (the reference's `_encode`): one frame is encoded directly; longer
// inputs are padded to a multiple of clip_length by repeating the last frame, encoded clip by clip,
// concatenated, and the last token_drop latents dropped (17n+5 frames -> 5n+2 latents).
// frames: RGB8 u8 [F, H, W, 3], or normalized f32 [3, F, H, W] / [1, 3, F, H, W] (host or device).
Result<VideoPosterior> encode_video(const ops::Context& ctx, const VideoVaeEncoder& enc, const Tensor& frames,
                                    const VideoEncodeOptions& options = {});

// z = mean + std·ε with ε = torch.randn(mean.shape) from torch's CPU generator seeded `seed` (fp32), rounded
// to fp16 and back, normalized (z − latents_mean[c]) / latents_std[c]. Same shape as post.mean.
Tensor sample_normalized_latent(const VideoPosterior& post, const VideoVaeConfig& config, uint64_t seed);

// The fl2va keyframe recipe (spec §3 step 4): one RGB8 image [H, W, 3] or [1, H, W, 3] -> its conditioning
// latent [1, latent, 1, H/16, W/16] (host f32): encoded as one frame (tiled), sampled with a private
// generator seeded 42 (`seed`), fp16-rounded, normalized.
Result<Tensor> encode_keyframe(const ops::Context& ctx, const VideoVaeEncoder& enc, const Tensor& image,
                               const VideoEncodeOptions& options = {}, uint64_t seed = 42);

} // namespace h3::model
