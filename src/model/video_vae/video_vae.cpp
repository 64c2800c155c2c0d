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

const char* video_vae_precision_name(VideoVaePrecision p) {
    switch (p) {
    case VideoVaePrecision::kBf16:
        return "bf16";
    case VideoVaePrecision::kFp8:
        return "fp8";
    case VideoVaePrecision::kExact:
        break;
    }
    return "exact";
}

DType video_vae_compute(VideoVaePrecision p, Device device) {
    return p == VideoVaePrecision::kExact ? default_video_vae_compute(device) : DType::kBF16;
}

Result<VideoVaePrecision> parse_video_vae_precision(const std::string& text, const std::string& field) {
    for (VideoVaePrecision p : {VideoVaePrecision::kExact, VideoVaePrecision::kBf16, VideoVaePrecision::kFp8})
        if (text == video_vae_precision_name(p)) return p;
    return invalid_field(field, field + " '" + text + "' must be exact, bf16 or fp8");
}

Status quantize_video_vae_fp8(const ops::Context& ctx, VideoVae& vae) {
    if (vae.compute != DType::kBF16)
        return invalid_argument(std::string("video VAE fp8: the decoder must compute in bf16, not ") +
                                dtype_name(vae.compute));
    if (ctx.device != vae.device)
        return invalid_argument("video VAE fp8: the weights live on another device than the context");
    const VideoVaeConfig& c = vae.config;
    if (c.dim() % 16 || c.ffn_dim() % 16)
        return invalid_argument("video VAE fp8: dim " + std::to_string(c.dim()) + " and ffn_dim " +
                                std::to_string(c.ffn_dim()) + " must be multiples of 16 (the e4m3 GEMMs' K)");
    if (!vae.weights.fp8.empty()) return ok_status(); // already
    std::vector<VideoVaeFp8Block> fp8;
    for (const VideoVaeBlock& b : vae.weights.blocks) {
        VideoVaeFp8Block f;
        H3_ASSIGN_OR_RETURN(f.q, ops::quantize_weight_fp8(ctx, b.q_w));
        H3_ASSIGN_OR_RETURN(f.k, ops::quantize_weight_fp8(ctx, b.k_w));
        H3_ASSIGN_OR_RETURN(f.v, ops::quantize_weight_fp8(ctx, b.v_w));
        H3_ASSIGN_OR_RETURN(f.o, ops::quantize_weight_fp8(ctx, b.o_w));
        H3_ASSIGN_OR_RETURN(f.ff1, ops::quantize_weight_fp8(ctx, b.ff1_w));
        H3_ASSIGN_OR_RETURN(f.ff2, ops::quantize_weight_fp8(ctx, b.ff2_w));
        fp8.push_back(std::move(f));
    }
    H3_TRY(ops::synchronize(ctx)); // the float weights are read by the queued quantization
    for (VideoVaeBlock& b : vae.weights.blocks) b.q_w = b.k_w = b.v_w = b.o_w = b.ff1_w = b.ff2_w = Tensor();
    vae.weights.fp8 = std::move(fp8);
    vae.tables.reset(); // per-call buffers are laid out for the precision
    return ok_status();
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
