// LatentSpec: what the pipeline knows of the latent spaces, derived from the checkpoint's configs the way
// diffusers' MiniMaxH3ModularPipeline derives it (its vae_* / audio_* / patch_size / canvas_multiple
// properties): video latent channels and the VAE's spatial / temporal compression and temporal chunking
// (vae/config.json), the DiT patch (transformer/config.json), the audio latent channels, sampling rate and
// hop (audio_vae/config.json), the conditioner width. The number of audio latents is the one exception: the
// official pipeline counts them at its constant 40 per second (diffusers'
// MINIMAX_H3_AUDIO_LATENTS_PER_SECOND, used by audio_latent_num_frames whatever the audio VAE's rates), so
// LatentSpec carries that number as such. Every model constant the pipeline uses comes from here;
// pipeline/geometry keeps request policy only (canvas rules, seconds limits).
//
// derive_latent_spec cross-checks the configs that describe the same tensor (the DiT's in_channels is the
// video VAE's latent_channels, audio_in_channels the audio VAE's, text_dim the text encoder's hidden size,
// the two DiT variants agree); a mismatch is a bad_input naming both files and fields. A component that is
// absent leaves its fields at the released checkpoint's values (diffusers' own fallbacks when a component is
// not loaded), so a DiT-only folder still generates latents.
#pragma once

#include "core/status.h"

#include <optional>
#include <string>

namespace h3::model {

struct AudioVaeConfig;
struct DitConfig;
struct VideoVaeConfig;

// The H3 family's fixed frame rate (diffusers MINIMAX_H3_FPS; no config carries it).
inline constexpr int kVideoFps = 24;
// The official pipeline's audio latent rate (diffusers MINIMAX_H3_AUDIO_LATENTS_PER_SECOND; no config carries
// it): audio_latent_num_frames(F) = int(round(F / 24 * 40)), independent of the audio VAE's config.
inline constexpr int kOfficialAudioLatentsPerSecond = 40;

struct LatentSpec {
    // Video (defaults: the released checkpoint).
    int latent_channels = 24;     // vae latent_channels = transformer in_channels
    int spatial_compression = 16; // product of vae spatial_downsample_factors
    int temporal_compression = 4; // product of vae temporal_downsample_factors
    int frames_per_chunk = 17;    // vae clip_length: pixel frames the encoder takes per chunk
    int latents_per_chunk = 5;    // ceil(clip_length / temporal_compression) (diffusers tokens_chunk_size)
    int token_drop = 3;           // vae token_drop: trailing latents dropped after the chunks
    int patch_t = 1, patch_h = 2, patch_w = 2; // transformer patch_size
    // Audio.
    int audio_latent_channels = 32; // audio_vae latent_channels = transformer audio_in_channels
    int audio_sample_rate = 32000;  // audio_vae sampling_rate
    int audio_hop = 800;            // product of audio_vae decoder_rates (samples per latent)
    // How many audio latents a second of video gets: the official pipeline's constant, not sampling_rate /
    // hop (the two agree for the released audio VAE; for one with other rates the official count holds).
    int official_audio_latents_per_second = kOfficialAudioLatentsPerSecond;
    int audio_channels = 2; // stereo: two channel-major blocks of audio rows (diffusers' constant)
    // Conditioning.
    int text_dim = 5120; // transformer text_dim = text_encoder text_config.hidden_size
    int fps = kVideoFps;

    // What canvas sides are multiples of: the VAE stride times the patch (32).
    int canvas_multiple() const;
    // The smallest F ≥ frames with F mod frames_per_chunk = latents_per_chunk (17n+5; diffusers
    // align_num_frames).
    int align_frames(int frames) const;
    // The largest aligned count ≤ frames, at least one chunk's (17n+5, n ≥ 1): the frames of a reference
    // video the encoder takes.
    int64_t align_frames_down(int64_t frames) const;
    // Latent frames of an aligned count: (F − L)/C·L + (L − token_drop) (5n+2).
    int latent_frames(int aligned_frames) const;
    // Pixel frames latent frame k covers: the first of a chunk covers C − (L−1)·T frames (1), the others T.
    int frames_of_latent(int k) const;
    double audio_latents_per_second() const; // official_audio_latents_per_second (40)
    // Audio latents per channel for F frames, as diffusers' audio_latent_num_frames computes them:
    // int(round(F / fps * 40)) in doubles, Python's round() rounding half to even.
    int audio_latents(int frames) const;
    // The shared rotary clock: 1 unit per audio latent, so a pixel frame is latents/s ÷ fps units (5/3).
    double rope_units_per_frame() const;
    int video_patch_dim() const { return latent_channels * patch_t * patch_h * patch_w; }

    std::string
    describe() const; // "video 24 ch ×16 spatial ×4 temporal (17n+5 → 5n+2), audio 32 ch 40/s, ..."
    Status validate(const std::string& origin) const;
    bool operator==(const LatentSpec&) const = default;
};

// The configs a checkpoint holds, each with the file it came from (for messages). Null: absent.
struct LatentSpecSources {
    const DitConfig* dit = nullptr; // transformer/ (or the only DiT present)
    std::string dit_file = {};
    const DitConfig* dit_ref = nullptr; // transformer_ref/, checked against `dit`
    std::string dit_ref_file = {};
    const VideoVaeConfig* video_vae = nullptr;
    std::string video_vae_file = {};
    const AudioVaeConfig* audio_vae = nullptr;
    std::string audio_vae_file = {};
    std::optional<int> text_hidden_size = {}; // text_encoder text_config.hidden_size
    std::string text_file = {};
};

Result<LatentSpec> derive_latent_spec(const LatentSpecSources& sources);

} // namespace h3::model
