// Video VAE decoder (`AutoencoderKLMiniMaxH3`, spec §9.2–9.3): latent de-normalization, `post_quant_conv`,
// the non-causal ViT decoder over every latent voxel of a tile-clip (+ register tokens + one zero token,
// 3-axis RoPE on the first 0.75·head_dim channels, layer-scale residuals, SwiGLU), LayerNorm + `proj_out`,
// unpatchify; temporal clips and spatial tiles stitched. Model code only calls ops: the tile/clip glue
// (unpatchify gather, ops::blend_tile, ops::crossfade_frames) runs where the decoder runs, so on CUDA the
// pixels stay on the device until the finished sample, or the RGB24 frames made from it there, is
// downloaded once.
#pragma once

#include "core/tensor.h"
#include "model/video_vae/video_vae_layout.h"
#include "ops/communicator.h"
#include "ops/context.h"
#include "ops/gemm_fp8.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace h3::model {

struct VideoVaeConfig {
    int latent_channels = 24;
    int out_channels = 3;
    int num_layers = 36;
    int num_heads = 32;
    int head_dim = 64;
    int num_register_tokens = 4;
    int ffn_mult = 4;
    double rope_theta = 100.0;
    double rope_dim_ratio = 0.75;
    double norm_eps = 1e-5;
    int patch = 16;  // product of spatial_downsample_factors
    int patch_t = 4; // product of temporal_downsample_factors
    int clip_length = 17;
    int token_drop = 3;
    std::vector<int> spatial_downsample_factors = {2, 2, 2, 2, 1, 1};
    std::vector<int> temporal_downsample_factors = {1, 2, 2, 1, 1, 1};
    std::vector<float> latents_mean, latents_std; // [latent_channels]
    // Encoder (spec §9.1; read by load_video_vae_encoder, video_vae_encoder.h).
    int in_channels = 3;
    std::vector<int> block_out_channels = {128, 256, 256, 512, 512, 1024};
    int layers_per_block = 2;
    int norm_num_groups = 32;
    double encoder_norm_eps = 1e-6;               // config key "norm_eps"
    std::string spatial_padding_mode = "reflect"; // F.pad mode: reflect | constant | replicate

    int dim() const { return num_heads * head_dim; }
    int rotary_dim() const { return static_cast<int>(head_dim * rope_dim_ratio); }
    int ffn_dim() const { return dim() * ffn_mult; }
    int patch_dim() const { return out_channels * patch_t * patch * patch; }
    static Result<VideoVaeConfig> from_json(const nlohmann::json& j, const std::string& origin);
    static Result<VideoVaeConfig> from_file(const std::string& path);
    nlohmann::json to_json() const; // diffusers config.json (decoder and encoder fields)
    Status validate(const std::string& origin) const;
    // The encoder fields (one level per block_out_channels entry, factors of 1 or 2, groups dividing every
    // level's channels, a known padding mode); the decoder alone does not need them.
    Status validate_encoder(const std::string& origin) const;
};

struct VideoVaeBlock {
    Tensor norm1, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, scale1;
    Tensor norm2, ff1_w, ff1_b, ff2_w, ff2_b, scale2;
};
// A block's six GEMM weights in e4m3 with per-output-channel scales (quantize_video_vae_fp8).
struct VideoVaeFp8Block {
    ops::Fp8Weight q, k, v, o, ff1, ff2;
};
struct VideoVaeWeights {
    Tensor pq_w, pq_b; // post_quant_conv as a [C, C] Linear
    Tensor proj_in_w, proj_in_b, registers;
    std::vector<VideoVaeBlock> blocks;
    // Set by quantize_video_vae_fp8 (one per block; the blocks' float GEMM weights are then released):
    // the blocks' GEMMs run in e4m3 (ops::gemm_fp8), everything else as `compute` (bf16) says.
    std::vector<VideoVaeFp8Block> fp8;
    Tensor norm_out_w, norm_out_b, proj_out_w, proj_out_b;
};

// Per-shape tables reused by every decoder call of one tile shape (RoPE cos/sin, layer-scale rows, the
// device unpatchify index); see video_vae_decode.cpp.
struct VideoVaeTables;

// Precision of the ViT blocks: their six GEMMs (q/k/v/out, ff in/out: weights, biases and activations, as
// the reference's autocast casts all three) and the attention run in `compute` (f16 like the reference's
// fp16 autocast, or bf16); the residual stream, the norms' math, layer scales, post_quant_conv/proj_in and
// norm_out/proj_out stay fp32. kF32: fp32 throughout.
struct VideoVae {
    VideoVaeConfig config;
    VideoVaeWeights weights;
    Device device = Device::cpu();
    DType compute = DType::kF32;
    mutable std::shared_ptr<VideoVaeTables> tables; // created on first use; shared by copies made after
};

// The default block precision: f16 on CUDA, fp32 on the CPU (the goldens' path).
DType default_video_vae_compute(Device device);

// How the decoder's blocks compute. kExact (the default): the reference's arithmetic — `compute` blocks
// (f16 on CUDA like its fp16 autocast, fp32 on the CPU). kBf16 (opt-in, lossy, faster on Hopper): the
// block weights, biases, activations, GEMMs and attention in bf16 (no quantization; on sm_90a the
// attention takes the wgmma kernel, which has no f16 variant), on the CPU too (each block tensor stored,
// so rounded, as bf16). kFp8 (opt-in, lossy, faster): the six block GEMMs in e4m3 (per-row activation and
// per-channel weight scales, fp32 accumulation), activations, attention and biases in bf16. The rest
// (residual stream, norms' math, proj_in/proj_out) as in kExact.
enum class VideoVaePrecision { kExact, kBf16, kFp8 };
const char* video_vae_precision_name(VideoVaePrecision p); // "exact" | "bf16" | "fp8"
// The block dtype a decoder of precision `p` loads with on `device`: default_video_vae_compute for kExact,
// bf16 for kBf16 and kFp8 (whose block GEMM weights quantize_video_vae_fp8 then makes e4m3).
DType video_vae_compute(VideoVaePrecision p, Device device);
// "exact" | "bf16" | "fp8"; errors name `field`.
Result<VideoVaePrecision> parse_video_vae_precision(const std::string& text,
                                                    const std::string& field = "vae_precision");

// Makes a bf16 decoder an fp8 one (VideoVaePrecision::kFp8): each block's GEMM weights quantized on ctx's
// device (ops::quantize_weight_fp8) into weights.fp8, the bf16 copies released. The decoder must have
// compute bf16; its widths (dim, ffn_dim) must be multiples of 16 (cuBLASLt's fp8 rule).
Status quantize_video_vae_fp8(const ops::Context& ctx, VideoVae& vae);

// `dir` is a vae component folder (config.json + safetensors, diffusers names; the encoder's tensors are not
// read: load_video_vae_encoder, video_vae_encoder.h). Shapes are checked against the config; the block GEMM
// weights are converted to `compute` (f32, f16 or bf16; nullopt: default_video_vae_compute), everything else
// to fp32, and placed on `device`.
Result<VideoVae> load_video_vae(const std::string& dir, Device device,
                                std::optional<DType> compute = std::nullopt);

// Random full-width weights generated where they live (ops::fill_uniform; benches): the config's shapes,
// block GEMM weights in `compute`, scales chosen so activations stay O(1) through every block.
Result<VideoVae> random_video_vae(const ops::Context& ctx, const VideoVaeConfig& config, DType compute,
                                  uint64_t seed);
// The diffusers names and shapes of every decoder tensor (for make-tiny and the loader).
std::vector<std::pair<std::string, std::vector<int64_t>>> video_vae_decoder_tensors(const VideoVaeConfig& c);

struct VideoDecodeOptions {
    int tile = 256;       // pixel tile size (both axes)
    int min_overlap = 64; // minimum pixel overlap
    bool tiling = true;   // false: every clip decoded whole
    int tile_batch = 0;   // tiles of one clip per decoder call (same shapes only); 0: up to 16 on CUDA (the
                          // clip's tiles split evenly over the fewest calls), 1 on the CPU
    // Download every decoder call's tiles and stitch / cross-fade them on the host (what the decode did
    // before the assembly moved to the device; kept for comparison, `bench vae --assemble-on-host`). Same
    // output.
    bool assemble_on_host = false;
    // Checked before every decoder call (each batch of tiles of each clip): once set, the decode stops with
    // kCancelled.
    const std::atomic<bool>* cancel = nullptr;
    // Optional: called after each temporal clip is decoded (and, on a group's rank 0, assembled) with the
    // clips done so far and the clip count — the decode stage's progress.
    std::function<void(int clips_done, int clips)> on_clip{};
    // A device group splitting the decode (issue #17): every rank of `group` calls decode_video_sample (or
    // decode_video_frames) with the same latents; each decodes its contiguous share of every clip's tiles,
    // the shares are gathered (one all_gather per clip) and rank 0 blends them — the single-rank result bit
    // for bit — while the other ranks return an undefined tensor. Null: this rank decodes everything.
    ops::Communicator* group = nullptr;
    // decode_video_frames only: when set, the frames are handed over as each clip's become final (host u8
    // [n, H, W, 3], in order, every frame once; the clip's frames converted where the sample is assembled and
    // downloaded alone) and decode_video_frames returns an undefined tensor. A sink's error ends the decode
    // with it. The request's mux encodes while the decoder works (pipeline/mp4_stream.h, issue #45).
    std::function<Status(Tensor)> frames_sink = {};
};

// Tiles per decoder call for a clip of `tiles` tiles on `device` under `options`.
int video_tile_batch(const VideoDecodeOptions& options, Device device, int tiles);

// One decoder call: z [C, t, h, w] de-normalized latents (host f32) -> pixels [3, t·pt, h·p, w·p] (host f32,
// ImageNet-normalized space).
Result<Tensor> decode_tile_clip(const ops::Context& ctx, const VideoVae& vae, const Tensor& z);
// Several equally-shaped tile-clips in one decoder call (rows stacked; attention per tile). Same results
// as one decode_tile_clip per tile.
Result<std::vector<Tensor>> decode_tile_clips(const ops::Context& ctx, const VideoVae& vae,
                                              const std::vector<Tensor>& zs);

// latents [1, C, T, h, w] (normalized, host or device) -> decoder sample [3, F, H, W] (host f32, ImageNet
// space, before de-normalization and clamping). On CUDA the sample is assembled on the device and
// downloaded once (~1.5 GB at 1344×768×124).
Result<Tensor> decode_video_sample(const ops::Context& ctx, const VideoVae& vae, const Tensor& latents,
                                   const VideoDecodeOptions& options = {});

// latents -> RGB24 frames [F, H, W, 3] (host u8): sample_to_rgb8(decode_video_sample(...)) byte for byte,
// but the frames are made where the sample was assembled (ops::sample_to_rgb8; on CUDA the device, unless
// `assemble_on_host`) and only they are downloaded (a quarter of the sample's bytes). A device group's
// ranks > 0 get an undefined tensor, as from decode_video_sample. What a request's decode runs. With
// options.frames_sink the same frames go to the sink clip by clip instead (the result is undefined).
Result<Tensor> decode_video_frames(const ops::Context& ctx, const VideoVae& vae, const Tensor& latents,
                                   const VideoDecodeOptions& options = {});

// sample [3, F, H, W] (host f32, contiguous) -> RGB24 frames [F, H, W, 3] u8 as diffusers' H3 output path
// makes them: x·std + mean (ImageNet, fp32), clamp [0, 1], then VaeImageProcessor.numpy_to_pil's
// (x · 255).round() in fp32 — numpy rounds half to even. ops::sample_to_rgb8 on the CPU.
Tensor sample_to_rgb8(const Tensor& sample);

} // namespace h3::model
