#include "model/video_vae/video_vae.h"

#include "core/cuda_api.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "ops/random.h"

#include <cmath>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

template <typename T>
Status read_field(const nlohmann::json& j, const char* key, T& out, const std::string& origin) {
    if (!j.contains(key)) return ok_status();
    try {
        out = j.at(key).get<T>();
    } catch (const std::exception& e) {
        return bad_input(origin + ": field '" + key + "': " + e.what());
    }
    return ok_status();
}

} // namespace

Result<VideoVaeConfig> VideoVaeConfig::from_json(const nlohmann::json& j, const std::string& origin) {
    if (!j.is_object()) return bad_input(origin + ": expected a JSON object");
    VideoVaeConfig c;
    H3_TRY(read_field(j, "latent_channels", c.latent_channels, origin));
    H3_TRY(read_field(j, "out_channels", c.out_channels, origin));
    H3_TRY(read_field(j, "decoder_num_layers", c.num_layers, origin));
    H3_TRY(read_field(j, "decoder_num_attention_heads", c.num_heads, origin));
    H3_TRY(read_field(j, "decoder_attention_head_dim", c.head_dim, origin));
    H3_TRY(read_field(j, "decoder_num_register_tokens", c.num_register_tokens, origin));
    H3_TRY(read_field(j, "decoder_ffn_mult", c.ffn_mult, origin));
    H3_TRY(read_field(j, "decoder_rope_theta", c.rope_theta, origin));
    H3_TRY(read_field(j, "decoder_rope_dim_ratio", c.rope_dim_ratio, origin));
    H3_TRY(read_field(j, "decoder_norm_eps", c.norm_eps, origin));
    H3_TRY(read_field(j, "clip_length", c.clip_length, origin));
    H3_TRY(read_field(j, "token_drop", c.token_drop, origin));
    H3_TRY(read_field(j, "spatial_downsample_factors", c.spatial_downsample_factors, origin));
    H3_TRY(read_field(j, "temporal_downsample_factors", c.temporal_downsample_factors, origin));
    H3_TRY(read_field(j, "latents_mean", c.latents_mean, origin));
    H3_TRY(read_field(j, "latents_std", c.latents_std, origin));
    H3_TRY(read_field(j, "in_channels", c.in_channels, origin));
    H3_TRY(read_field(j, "block_out_channels", c.block_out_channels, origin));
    H3_TRY(read_field(j, "layers_per_block", c.layers_per_block, origin));
    H3_TRY(read_field(j, "norm_num_groups", c.norm_num_groups, origin));
    H3_TRY(read_field(j, "norm_eps", c.encoder_norm_eps, origin));
    H3_TRY(read_field(j, "spatial_padding_mode", c.spatial_padding_mode, origin));
    c.patch = 1;
    for (int f : c.spatial_downsample_factors) c.patch *= f;
    c.patch_t = 1;
    for (int f : c.temporal_downsample_factors) c.patch_t *= f;
    if (c.latents_mean.empty()) c.latents_mean.assign(static_cast<size_t>(c.latent_channels), 0.0f);
    if (c.latents_std.empty()) c.latents_std.assign(static_cast<size_t>(c.latent_channels), 1.0f);
    H3_TRY(c.validate(origin));
    return c;
}

Result<VideoVaeConfig> VideoVaeConfig::from_file(const std::string& path) {
    H3_ASSIGN_OR_RETURN(auto j, io::read_json_file(path));
    return from_json(j, path);
}

nlohmann::json VideoVaeConfig::to_json() const {
    return {{"_class_name", "AutoencoderKLMiniMaxH3"},
            {"in_channels", in_channels},
            {"out_channels", out_channels},
            {"latent_channels", latent_channels},
            {"block_out_channels", block_out_channels},
            {"layers_per_block", layers_per_block},
            {"spatial_downsample_factors", spatial_downsample_factors},
            {"temporal_downsample_factors", temporal_downsample_factors},
            {"norm_num_groups", norm_num_groups},
            {"norm_eps", encoder_norm_eps},
            {"spatial_padding_mode", spatial_padding_mode},
            {"decoder_num_layers", num_layers},
            {"decoder_num_attention_heads", num_heads},
            {"decoder_attention_head_dim", head_dim},
            {"decoder_num_register_tokens", num_register_tokens},
            {"decoder_ffn_mult", ffn_mult},
            {"decoder_rope_theta", rope_theta},
            {"decoder_rope_dim_ratio", rope_dim_ratio},
            {"decoder_norm_eps", norm_eps},
            {"clip_length", clip_length},
            {"token_drop", token_drop},
            {"latents_mean", latents_mean},
            {"latents_std", latents_std}};
}

Status VideoVaeConfig::validate(const std::string& origin) const {
    auto bad = [&](const std::string& m) { return bad_input(origin + ": " + m); };
    if (latent_channels < 1 || out_channels < 1 || num_layers < 0 || num_heads < 1 || head_dim < 1)
        return bad("decoder sizes must be positive");
    const int rot = rotary_dim();
    if (rot < 0 || rot > head_dim || rot % 6)
        return bad("rotary dim " + std::to_string(rot) +
                   " (head_dim · rope_dim_ratio) must be a multiple of 6 "
                   "and <= head_dim");
    if (patch < 1 || patch_t < 1 || clip_length < 1 || token_drop < 0) return bad("bad patch/clip geometry");
    if (latents_mean.size() != static_cast<size_t>(latent_channels) ||
        latents_std.size() != static_cast<size_t>(latent_channels))
        return bad("latents_mean/latents_std must hold " + std::to_string(latent_channels) + " values each");
    return ok_status();
}

Status VideoVaeConfig::validate_encoder(const std::string& origin) const {
    auto bad = [&](const std::string& m) { return bad_input(origin + ": encoder: " + m); };
    const size_t levels = block_out_channels.size();
    if (levels == 0) return bad("block_out_channels is empty");
    if (spatial_downsample_factors.size() != levels || temporal_downsample_factors.size() != levels)
        return bad(
            "spatial_downsample_factors and temporal_downsample_factors must have one entry per level (" +
            std::to_string(levels) + ")");
    if (in_channels < 1 || layers_per_block < 1 || latent_channels < 1) return bad("sizes must be positive");
    if (norm_num_groups < 1) return bad("norm_num_groups must be >= 1");
    for (size_t i = 0; i < levels; ++i) {
        const int ch = block_out_channels[i];
        if (ch < 1 || ch % norm_num_groups)
            return bad("level " + std::to_string(i) + " has " + std::to_string(ch) +
                       " channels, not a positive multiple of norm_num_groups " +
                       std::to_string(norm_num_groups));
        for (int f : {spatial_downsample_factors[i], temporal_downsample_factors[i]})
            if (f != 1 && f != 2) return bad("downsample factors must be 1 or 2");
    }
    if (!(encoder_norm_eps >= 0.0)) return bad("norm_eps must be >= 0");
    if (spatial_padding_mode != "reflect" && spatial_padding_mode != "constant" &&
        spatial_padding_mode != "zeros" && spatial_padding_mode != "replicate")
        return bad("spatial_padding_mode '" + spatial_padding_mode + "' (reflect | constant | replicate)");
    return ok_status();
}

std::vector<std::pair<std::string, std::vector<int64_t>>> video_vae_decoder_tensors(const VideoVaeConfig& c) {
    const int64_t d = c.dim(), lc = c.latent_channels, ff = c.ffn_dim();
    std::vector<std::pair<std::string, std::vector<int64_t>>> t = {
        {"post_quant_conv.weight", {lc, lc, 1, 1, 1}},
        {"post_quant_conv.bias", {lc}},
        {"decoder.proj_in.weight", {d, lc}},
        {"decoder.proj_in.bias", {d}},
        {"decoder.register_tokens", {1, c.num_register_tokens, d}}};
    for (int i = 0; i < c.num_layers; ++i) {
        const std::string p = "decoder.transformer_blocks." + std::to_string(i) + ".";
        for (const char* n : {"to_q", "to_k", "to_v", "to_out.0"}) {
            t.push_back({p + "attn." + n + ".weight", {d, d}});
            t.push_back({p + "attn." + n + ".bias", {d}});
        }
        t.push_back({p + "norm1.weight", {d}});
        t.push_back({p + "norm2.weight", {d}});
        t.push_back({p + "scale1", {d}});
        t.push_back({p + "scale2", {d}});
        t.push_back({p + "ff.net.0.proj.weight", {2 * ff, d}});
        t.push_back({p + "ff.net.0.proj.bias", {2 * ff}});
        t.push_back({p + "ff.net.2.weight", {d, ff}});
        t.push_back({p + "ff.net.2.bias", {d}});
    }
    t.push_back({"decoder.norm_out.weight", {d}});
    t.push_back({"decoder.norm_out.bias", {d}});
    t.push_back({"decoder.proj_out.weight", {c.patch_dim(), d}});
    t.push_back({"decoder.proj_out.bias", {c.patch_dim()}});
    return t;
}

DType default_video_vae_compute(Device device) {
    return device.is_cpu() ? DType::kF32 : DType::kF16;
}

namespace {

bool is_block_gemm_weight(const std::string& name) {
    if (name.rfind("decoder.transformer_blocks.", 0) != 0) return false;
    for (const std::string s : {"attn.to_q.weight", "attn.to_k.weight", "attn.to_v.weight",
                                "attn.to_out.0.weight", "ff.net.0.proj.weight", "ff.net.2.weight"})
        if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
    return false;
}

// The block GEMMs' biases: in `compute` too (autocast casts a Linear's bias with its weight), which also
// keeps cuBLASLt on its fused bias epilogue (it has none for an fp32 bias with a half output).
bool is_block_gemm_bias(const std::string& name) {
    if (name.size() < 5 || name.compare(name.size() - 5, 5, ".bias") != 0) return false;
    std::string weight = name;
    weight.replace(weight.size() - 5, 5, ".weight");
    return is_block_gemm_weight(weight);
}

bool in_compute_dtype(const std::string& name) {
    return is_block_gemm_weight(name) || is_block_gemm_bias(name);
}

Status check_compute(DType compute) {
    if (compute != DType::kF32 && compute != DType::kF16 && compute != DType::kBF16)
        return invalid_argument(std::string("video VAE: compute dtype must be f32, f16 or bf16, got ") +
                                dtype_name(compute));
    return ok_status();
}

// The named tensors into VideoVaeWeights (views for the [C,C,1,1,1] conv and the [1,R,D] registers).
void assign_weights(VideoVae& vae, std::map<std::string, Tensor>& got) {
    const VideoVaeConfig& c = vae.config;
    VideoVaeWeights& w = vae.weights;
    const int64_t lc = c.latent_channels;
    w.pq_w = got["post_quant_conv.weight"].view({lc, lc});
    w.pq_b = got["post_quant_conv.bias"];
    w.proj_in_w = got["decoder.proj_in.weight"];
    w.proj_in_b = got["decoder.proj_in.bias"];
    w.registers = got["decoder.register_tokens"].view({c.num_register_tokens, c.dim()});
    for (int i = 0; i < c.num_layers; ++i) {
        const std::string p = "decoder.transformer_blocks." + std::to_string(i) + ".";
        VideoVaeBlock b;
        b.norm1 = got[p + "norm1.weight"];
        b.q_w = got[p + "attn.to_q.weight"];
        b.q_b = got[p + "attn.to_q.bias"];
        b.k_w = got[p + "attn.to_k.weight"];
        b.k_b = got[p + "attn.to_k.bias"];
        b.v_w = got[p + "attn.to_v.weight"];
        b.v_b = got[p + "attn.to_v.bias"];
        b.o_w = got[p + "attn.to_out.0.weight"];
        b.o_b = got[p + "attn.to_out.0.bias"];
        b.scale1 = got[p + "scale1"].view({1, c.dim()});
        b.norm2 = got[p + "norm2.weight"];
        b.ff1_w = got[p + "ff.net.0.proj.weight"];
        b.ff1_b = got[p + "ff.net.0.proj.bias"];
        b.ff2_w = got[p + "ff.net.2.weight"];
        b.ff2_b = got[p + "ff.net.2.bias"];
        b.scale2 = got[p + "scale2"].view({1, c.dim()});
        w.blocks.push_back(std::move(b));
    }
    w.norm_out_w = got["decoder.norm_out.weight"];
    w.norm_out_b = got["decoder.norm_out.bias"];
    w.proj_out_w = got["decoder.proj_out.weight"];
    w.proj_out_b = got["decoder.proj_out.bias"];
}

} // namespace

Result<VideoVae> load_video_vae(const std::string& dir, Device device, std::optional<DType> compute) {
    VideoVae vae;
    vae.device = device;
    vae.compute = compute.value_or(default_video_vae_compute(device));
    H3_TRY(check_compute(vae.compute));
    H3_ASSIGN_OR_RETURN(vae.config, VideoVaeConfig::from_file((fs::path(dir) / "config.json").string()));
    H3_ASSIGN_OR_RETURN(auto ts, io::TensorSet::open(dir));
    const VideoVaeConfig& c = vae.config;
    std::map<std::string, Tensor> got;
    for (const auto& [name, shape] : video_vae_decoder_tensors(c)) {
        if (!ts.contains(name)) return bad_input("video VAE " + dir + " lacks tensor '" + name + "'");
        H3_ASSIGN_OR_RETURN(Tensor t, ts.tensor(name));
        if (t.shape().to_vector() != shape)
            return bad_input("video VAE " + dir + ": tensor '" + name + "' has shape " +
                             t.shape().to_string() + ", the config implies " + Shape(shape).to_string());
        if (!dtype_is_float(t.dtype()))
            return bad_input("video VAE " + dir + ": tensor '" + name + "' is not a float tensor");
        H3_ASSIGN_OR_RETURN(t, t.to_dtype(in_compute_dtype(name) ? vae.compute : DType::kF32));
        if (!device.is_cpu()) {
            H3_ASSIGN_OR_RETURN(t, t.to(device));
        }
        got[name] = t;
    }
    assign_weights(vae, got);
    return vae;
}

Result<VideoVae> random_video_vae(const ops::Context& ctx, const VideoVaeConfig& config, DType compute,
                                  uint64_t seed) {
    H3_TRY(check_compute(compute));
    H3_TRY(config.validate("random video VAE config"));
    VideoVae vae;
    vae.config = config;
    vae.device = ctx.device;
    vae.compute = compute;
    std::map<std::string, Tensor> got;
    for (const auto& [name, shape] : video_vae_decoder_tensors(config)) {
        const bool gemm = in_compute_dtype(name);
        H3_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(Shape(shape), gemm ? compute : DType::kF32, ctx.device));
        const bool norm = name.find("norm") != std::string::npos && name.find(".weight") != std::string::npos;
        const bool scale = name.find("scale") != std::string::npos;
        float bound = 0.01f; // biases
        if (norm)
            bound = 0.1f;
        else if (scale)
            bound = 0.1f;
        else if (name == "decoder.register_tokens")
            bound = 1.0f;
        else if (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
            int64_t fan_in = 1;
            for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
            bound = 1.0f / std::sqrt(static_cast<float>(fan_in)); // uniform Linear init scale
        }
        H3_TRY(ops::fill_uniform(ctx, {.seed = seed++, .bound = bound, .offset = norm ? 1.0f : 0.0f}, t));
        got[name] = t;
    }
    assign_weights(vae, got);
    return vae;
}

} // namespace h3::model
