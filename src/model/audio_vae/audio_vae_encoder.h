// Audio VAE encoder (`AutoencoderKLMiniMaxH3Audio.encode`, spec §10 "Encoder"; ref2va audio references and
// video soundtracks): mono waveforms right-padded to a multiple of the hop → DAC encoder (conv_in k7; per
// stride s a block of 3 residual units Snake → conv k7 dilation 1/3/9 → Snake → conv k1, then Snake and a
// strided conv k = 2s, padding ceil(s/2), doubling the channels; Snake; conv k3 to latent_dim; weight-norm
// folded at load) → `pre_block` over the [A, latent_dim] rows: y = proj(LN3(x)) + attn(LN1(x)), where attn
// is causal attention whose heads are averaged and whose head dim is adaptive-average-pooled to
// latent_channels before its own Linear, then y += GeGLU-MLP(LN2(y)) (the MLP applies its own LayerNorm
// first; tanh GELU) → `mean_proj` (Conv1d k1) = the posterior mean, which MiniMax-H3 consumes (`mode()`;
// `logs_proj` is never evaluated). fp32 throughout. Stereo = two mono encodes (L, R), one after the other.
// Model code only calls ops: the same code runs on the CPU reference and on CUDA.
#pragma once

#include "model/audio_vae/audio_vae.h"

#include <string>
#include <utility>
#include <vector>

namespace h3::model {

struct AudioLinear {
    Tensor w, b; // [out, in], [out]
};
struct AudioLayerNorm {
    Tensor w, b; // [D]
};
struct DacResidualUnit {
    int dilation = 1;
    Tensor alpha1, alpha2;  // Snake, linear space [C]
    AudioConv conv1, conv2; // k7 dilated, k1 (weight-norm folded)
};
struct DacEncoderBlock {
    int stride = 2;
    std::vector<DacResidualUnit> units; // dilations 1, 3, 9 at dim/2 channels
    Tensor alpha;                       // Snake before the strided conv [dim/2]
    AudioConv down;                     // dim/2 → dim, k = 2·stride
};
struct AudioPreBlockWeights {
    AudioLayerNorm norm1, norm2, norm3, mlp_norm;
    AudioLinear q, k, v;   // rows of attn.qkv.weight with q_bias / zero_k_bias (zeros if absent) / v_bias
    Tensor pool;           // [latent_channels, latent_dim]: mean over heads, adaptive average pool of a head
    AudioLinear attn_proj; // [O, O]
    AudioLinear proj;      // [O, latent_dim]
    AudioLinear mlp_in;    // [w1; w0] → rows [value | gate] for ops::geglu: [2·2O, O]
    AudioLinear mlp_out;   // w2 [O, 2O]
};
struct AudioVaeEncoderWeights {
    AudioConv conv_in;                   // 1 → encoder_dim, k7
    std::vector<DacEncoderBlock> blocks; // one per encoder rate
    Tensor alpha_out;                    // Snake before conv_out
    AudioConv conv_out;                  // → latent_dim, k3
    AudioPreBlockWeights pre;
    AudioLinear mean_proj; // [O, O] (the Conv1d k1 weight [O, O, 1] viewed as a Linear)
};

struct AudioVaeEncoder {
    AudioVaeConfig config;
    AudioVaeEncoderWeights weights;
    Device device = Device::cpu();
};

// The diffusers names and shapes of every encoder-side tensor — encoder.* (weight-norm pairs as
// weight_g/weight_v, Snake alphas [1, C, 1]), pre_block.* (with the zero_k_bias buffer), mean_proj.*,
// logs_proj.* — in the loader's order (for make-tiny). logs_proj is listed because checkpoints carry it; the
// loader does not read it.
std::vector<std::pair<std::string, std::vector<int64_t>>> audio_vae_encoder_tensors(const AudioVaeConfig& c);

// `dir` is an audio_vae component folder (config.json + safetensors, diffusers names). Weight-norm pairs are
// folded; every shape is checked against the config; a missing tensor is named. A checkpoint without any
// encoder.* tensor is bad_input ("... has no encoder weights ..."). Weights are widened to fp32 on `device`.
Result<AudioVaeEncoder> load_audio_vae_encoder(const std::string& dir, Device device);
// Random weights of the config's shapes (host generated, then placed on ctx.device; timing tests).
Result<AudioVaeEncoder> random_audio_vae_encoder(const ops::Context& ctx, const AudioVaeConfig& config,
                                                 uint64_t seed);

// waveform [C, N] f32 (C = 1 or 2, N >= 1; host, or any device — it is read on the host), each channel one
// mono batch item → posterior mean [C, latent_channels, A] f32 on the host, A = ceil(N / hop) (the waveform
// is right-padded with zeros to A·hop).
Result<Tensor> encode_audio_mean(const ops::Context& ctx, const AudioVaeEncoder& enc, const Tensor& waveform,
                                 const AudioVaeRunOptions& options = {});

// The ref2va reference rows (diffusers MiniMaxH3Ref2VAReferenceEncoderStep): stereo [2, N] → the posterior
// mean transposed to [2, A, latent_channels], normalized per channel in fp32 with `cfg`'s latents_mean/std
// ((z − mean) / std), reshaped to channel-major rows [2·A, latent_channels] (left channel's A rows first).
Result<Tensor> encode_reference_audio_rows(const ops::Context& ctx, const AudioVaeEncoder& enc,
                                           const AudioVaeConfig& cfg, const Tensor& stereo,
                                           const AudioVaeRunOptions& options = {});

} // namespace h3::model
