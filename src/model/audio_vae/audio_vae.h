// Audio VAE decoder (`AutoencoderKLMiniMaxH3Audio`, spec §10): per-channel de-normalization, `dec_in_proj`,
// BigVGAN (weight-norm folded at load, transposed-conv upsamplers, AMP blocks averaged over the kernels,
// anti-aliased SnakeBeta with Kaiser-sinc filters), `conv_post`, clamp to [−1, 1]. fp32 throughout (bf16
// costs ~20 dB). Stereo = two mono decodes (L, R), one after the other.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <string>
#include <vector>

namespace h3::model {

struct AudioVaeConfig {
    int encoder_dim = 64;                             // DAC encoder width after conv_in (doubles per block)
    std::vector<int> encoder_rates = {2, 4, 4, 5, 5}; // encoder strides (their product is the hop)
    int num_attention_heads = 8;                      // pre_block causal attention
    int latent_channels = 32;
    int latent_dim = 2048;
    int decoder_dim = 1024;
    std::vector<int> decoder_rates = {5, 5, 2, 2, 2, 2, 2};
    std::vector<int> decoder_kernel_sizes = {9, 9, 4, 4, 4, 4, 4};
    std::vector<int> resblock_kernel_sizes = {3, 7, 11};
    std::vector<std::vector<int>> resblock_dilation_sizes = {{1, 3, 5}, {1, 3, 5}, {1, 3, 5}};
    int sampling_rate = 32000;
    std::vector<float> latents_mean, latents_std; // [latent_channels]

    int hop_length() const;  // product of the decoder rates (800)
    int encoder_hop() const; // product of the encoder rates (800)
    static Result<AudioVaeConfig> from_json(const nlohmann::json& j, const std::string& origin);
    static Result<AudioVaeConfig> from_file(const std::string& path);
    nlohmann::json to_json() const; // diffusers config.json
    Status validate(const std::string& origin) const;
    // The encoder's fields: rates >= 2 whose product is hop_length(), latent_dim a multiple of the heads.
    Status validate_encoder(const std::string& origin) const;
};

// The Kaiser-windowed sinc low-pass filter of alias-free-torch (`kaiser_sinc_filter1d`), normalized to sum 1.
std::vector<float> kaiser_sinc_filter(double cutoff, double half_width, int kernel_size);

struct AudioConv {
    Tensor w, b; // b undefined for conv_post
};
struct AudioAct {
    Tensor alpha, beta; // log-space, [C]
};
struct AmpBlockWeights {
    int kernel = 3;
    std::vector<int> dilations;
    std::vector<AudioConv> convs1, convs2;
    std::vector<AudioAct> acts; // 2 per dilation: before convs1[m], before convs2[m]
};
struct AudioVaeWeights {
    AudioConv in_proj, conv_pre, conv_post;
    std::vector<AudioConv> ups;
    std::vector<AmpBlockWeights> blocks; // stage-major: stage i, kernel j at i·nk + j
    AudioAct act_post;
    Tensor filter; // [12] Kaiser sinc (cutoff 0.25, half-width 0.3): shared by every up/down-sampler
};

struct AudioVae {
    AudioVaeConfig config;
    AudioVaeWeights weights;
    Device device = Device::cpu();
};

// `dir` is an audio_vae component folder (config.json + safetensors, diffusers names). Weight-norm pairs
// (weight_g, weight_v) are folded into plain weights; every shape is checked against the config; the
// filter buffers, when the checkpoint carries them, must match the computed Kaiser filter.
Result<AudioVae> load_audio_vae(const std::string& dir, Device device);
// The diffusers names and shapes of every decoder tensor (weight-norm pairs as weight_g/weight_v, the
// resampling filter buffers [1,1,12]), in the loader's order (for make-tiny).
std::vector<std::pair<std::string, std::vector<int64_t>>> audio_vae_decoder_tensors(const AudioVaeConfig& c);

// Random full-width weights generated on ctx's device (ops::fill_uniform; benches).
Result<AudioVae> random_audio_vae(const ops::Context& ctx, const AudioVaeConfig& config, uint64_t seed);

// Options of an audio VAE run (decoder or encoder).
struct AudioVaeRunOptions {
    // Checked before each channel and each upsampling stage / encoder block: once set, the run stops with
    // kCancelled.
    const std::atomic<bool>* cancel = nullptr;
};

// latents [2, C, A] f32 (normalized, any device) -> waveform [2, A·hop] f32 on the host, in [−1, 1].
Result<Tensor> decode_audio(const ops::Context& ctx, const AudioVae& vae, const Tensor& latents,
                            const AudioVaeRunOptions& options = {});

} // namespace h3::model
