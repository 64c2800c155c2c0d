// The tiny checkpoint's decoders: `vae/` (AutoencoderKLMiniMaxH3) and `audio_vae/`
// (AutoencoderKLMiniMaxH3Audio) in the diffusers layout: official config.json fields and tensor names
// (the video VAE's decoder and encoder, the audio VAE's decoder and encoder), tiny sizes, fp32 weights
// deterministic from a seed.
#pragma once

#include "core/status.h"
#include "model/audio_vae/audio_vae.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/video_vae/video_vae.h"

#include <cstdint>
#include <string>

namespace h3::model {

// 2 ViT blocks, 2 heads × 16 (rotary 12), official patching (×16 spatial, ×4 temporal) so a tiny DiT
// latent grid decodes to the canvas it was planned for; official latents_mean/std. Encoder: the official
// 6 levels × 2 ResNet blocks and downsample factors with widths 8, 16, 16, 16, 16, 32 and GroupNorm(4).
// `geometry` sets the latent channels (statistics: the official ones, cycled) and the stride (8: the fourth
// level does not downsample).
VideoVaeConfig tiny_video_vae_config(const TinyGeometry& geometry = {});
// latent_dim 16, decoder_dim 16, rates 8·10·10 (hop 800 = the official 40 latents/s), kernels 16/20/20,
// official resblocks and latents_mean/std. Encoder: the official rates 2·4·4·5·5 with encoder_dim 4 and 2
// attention heads of 8 (pooled up to the 32 latent channels). `geometry` sets the latent channels, and with
// audio_hop 4 the rates: [2, 2] for the encoder and the decoder (kernels 4/4).
AudioVaeConfig tiny_audio_vae_config(const TinyGeometry& geometry = {});

// Writes `dir`/config.json + diffusion_pytorch_model.safetensors.
Status write_tiny_video_vae(const std::string& dir, uint64_t seed,
                            const VideoVaeConfig& config = tiny_video_vae_config());
Status write_tiny_audio_vae(const std::string& dir, uint64_t seed,
                            const AudioVaeConfig& config = tiny_audio_vae_config());

// Adds vae/ (seed + 11) and audio_vae/ (seed + 12) to a diffusers-layout checkpoint (the original layout's
// video_vae/ + audio_vae/ formats are not produced).
Status write_tiny_vaes(const TinyCheckpointParams& params);

} // namespace h3::model
