#include "model/dit/dit_tensors.h"

#include <array>
#include <cstring>
#include <utility>

namespace h3::model {

namespace {

// Non-block renames, diffusers prefix → original prefix (the one table; blocks are handled below).
constexpr std::array<std::pair<const char*, const char*>, 10> kTopLevel = {{
    {"proj_in.", "video_patch_proj."},
    {"audio_proj_in.", "audio_patch_proj."},
    {"context_embedder.", "condition_proj."},
    {"time_embedder.linear_1.", "time_embedder.proj_in."},
    {"time_embedder.linear_2.", "time_embedder.proj_out."},
    {"token_refiner.final_norm.", "token_refiner.final_norm."},
    {"norm_out.norm.", "final_layer.norm."},
    {"norm_out.linear.", "final_layer.adaln_proj.linear."},
    {"proj_out.", "final_layer.video_out."},
    {"audio_proj_out.", "final_layer.audio_out."},
}};

// Inside a block (refiner or main), diffusers suffix → original suffix. to_q/k/v are fused.
constexpr std::array<std::pair<const char*, const char*>, 9> kInBlock = {{
    {"norm1.weight", "norm1.weight"},
    {"attn.norm_q.weight", "attn.q_norm.weight"},
    {"attn.norm_k.weight", "attn.k_norm.weight"},
    {"attn.to_out.0.weight", "attn.out_proj.weight"},
    {"norm2.weight", "norm2.weight"},
    {"ff.net.0.proj.weight", "mlp.fc1.weight"},
    {"ff.net.2.weight", "mlp.fc2.weight"},
    {"adaln_proj.linear.weight", "adaln_proj.linear.weight"},
    {"attn.to_gate_compress.weight", "attn.to_gate_compress.weight"}, // FastH3 only (gate_compress_spec)
}};
constexpr const char* kAdalnBias = "adaln_proj.linear.bias";

bool starts_with(const std::string& s, const char* p) {
    return s.rfind(p, 0) == 0;
}

// Splits "transformer_blocks.12.attn.to_q.weight" into prefix "transformer_blocks.", index 12 and the
// suffix; false when `name` does not start with `prefix` followed by a number and a dot.
bool split_block(const std::string& name, const char* prefix, int& index, std::string& suffix) {
    if (!starts_with(name, prefix)) return false;
    size_t pos = std::strlen(prefix);
    size_t dot = name.find('.', pos);
    if (dot == std::string::npos || dot == pos) return false;
    index = 0;
    for (size_t i = pos; i < dot; ++i) {
        if (name[i] < '0' || name[i] > '9') return false;
        index = index * 10 + (name[i] - '0');
        if (index > 1000000) return false;
    }
    suffix = name.substr(dot + 1);
    return true;
}

void add_block(std::vector<TensorSpec>& out, const std::string& prefix, const DitConfig& c, DitFormat f,
               bool with_adaln) {
    const int64_t d = c.hidden_size, inner = c.inner_dim(), hd = c.attention_head_dim, ffn = c.ffn_dim;
    const DType bf = DType::kBF16;
    if (f == DitFormat::kDiffusers) {
        out.push_back({prefix + "norm1.weight", {d}, bf});
        out.push_back({prefix + "attn.to_q.weight", {inner, d}, bf});
        out.push_back({prefix + "attn.to_k.weight", {inner, d}, bf});
        out.push_back({prefix + "attn.to_v.weight", {inner, d}, bf});
        out.push_back({prefix + "attn.norm_q.weight", {hd}, bf});
        out.push_back({prefix + "attn.norm_k.weight", {hd}, bf});
        out.push_back({prefix + "attn.to_out.0.weight", {d, inner}, bf});
        out.push_back({prefix + "norm2.weight", {d}, bf});
        out.push_back({prefix + "ff.net.0.proj.weight", {2 * ffn, d}, bf});
        out.push_back({prefix + "ff.net.2.weight", {d, ffn}, bf});
    } else {
        out.push_back({prefix + "norm1.weight", {d}, bf});
        out.push_back({prefix + "attn.qkv_proj.weight", {3 * inner, d}, bf});
        out.push_back({prefix + "attn.q_norm.weight", {hd}, bf});
        out.push_back({prefix + "attn.k_norm.weight", {hd}, bf});
        out.push_back({prefix + "attn.out_proj.weight", {d, inner}, bf});
        out.push_back({prefix + "norm2.weight", {d}, bf});
        out.push_back({prefix + "mlp.fc1.weight", {2 * ffn, d}, bf});
        out.push_back({prefix + "mlp.fc2.weight", {d, ffn}, bf});
    }
    if (with_adaln) {
        out.push_back({prefix + "adaln_proj.linear.weight", {c.adaln_out_features(), c.time_embed_dim}, bf});
        out.push_back({prefix + "adaln_proj.linear.bias", {c.adaln_out_features()}, bf});
    }
}

} // namespace

std::string gate_compress_name(int block) {
    return "transformer_blocks." + std::to_string(block) + ".attn.to_gate_compress.weight";
}

TensorSpec gate_compress_spec(const DitConfig& c, int block) {
    return {gate_compress_name(block), {c.inner_dim(), c.hidden_size}, DType::kBF16};
}

bool is_fp32_island(const std::string& n) {
    return starts_with(n, "proj_in.") || starts_with(n, "audio_proj_in.") ||
           starts_with(n, "time_embedder.") || starts_with(n, "proj_out.") ||
           starts_with(n, "audio_proj_out.");
}

std::vector<TensorSpec> dit_tensor_specs(const DitConfig& c, DitFormat f) {
    std::vector<TensorSpec> out;
    const int64_t d = c.hidden_size;
    auto top = [&](const std::string& diffusers_name, std::vector<int64_t> shape) {
        DType dt = is_fp32_island(diffusers_name) ? DType::kF32 : DType::kBF16;
        std::string name = diffusers_name;
        if (f == DitFormat::kOriginal) name = *original_name_of(diffusers_name);
        out.push_back({name, std::move(shape), dt});
    };
    top("proj_in.weight", {d, c.video_patch_dim()});
    top("proj_in.bias", {d});
    top("audio_proj_in.weight", {d, c.audio_in_channels});
    top("audio_proj_in.bias", {d});
    top("context_embedder.weight", {d, c.text_dim});
    top("context_embedder.bias", {d});
    top("time_embedder.linear_1.weight", {c.time_embed_hidden_dim, c.freq_dim});
    top("time_embedder.linear_1.bias", {c.time_embed_hidden_dim});
    top("time_embedder.linear_2.weight", {c.time_embed_dim, c.time_embed_hidden_dim});
    top("time_embedder.linear_2.bias", {c.time_embed_dim});
    top("token_refiner.final_norm.weight", {d});
    top("norm_out.norm.weight", {d});
    top("norm_out.linear.weight", {c.final_adaln_out_features(), c.time_embed_dim});
    top("norm_out.linear.bias", {c.final_adaln_out_features()});
    top("proj_out.weight", {c.video_patch_dim(), d});
    top("proj_out.bias", {c.video_patch_dim()});
    top("audio_proj_out.weight", {c.audio_in_channels, d});
    top("audio_proj_out.bias", {c.audio_in_channels});
    if (f == DitFormat::kOriginal) out.push_back({"rope.inv_freq", {c.rope_freq_dim}, DType::kF32});
    for (int i = 0; i < c.num_refiner_layers; ++i) {
        std::string p =
            (f == DitFormat::kDiffusers ? "token_refiner.refiner_blocks." : "token_refiner.blocks.") +
            std::to_string(i) + ".";
        add_block(out, p, c, f, false);
    }
    for (int i = 0; i < c.num_layers; ++i) {
        std::string p =
            (f == DitFormat::kDiffusers ? "transformer_blocks." : "blocks.") + std::to_string(i) + ".";
        add_block(out, p, c, f, true);
    }
    return out;
}

std::optional<std::string> original_name_of(const std::string& n) {
    for (const auto& [dp, op] : kTopLevel)
        if (starts_with(n, dp)) return std::string(op) + n.substr(std::strlen(dp));
    int idx = 0;
    std::string suffix, prefix;
    if (split_block(n, "transformer_blocks.", idx, suffix))
        prefix = "blocks." + std::to_string(idx) + ".";
    else if (split_block(n, "token_refiner.refiner_blocks.", idx, suffix))
        prefix = "token_refiner.blocks." + std::to_string(idx) + ".";
    else
        return std::nullopt;
    if (suffix == "attn.to_q.weight" || suffix == "attn.to_k.weight" || suffix == "attn.to_v.weight")
        return prefix + "attn.qkv_proj.weight";
    if (suffix == kAdalnBias) return prefix + suffix;
    for (const auto& [ds, os] : kInBlock)
        if (suffix == ds) return prefix + os;
    return std::nullopt;
}

std::optional<OriginalMapping> map_original_name(const std::string& n) {
    if (n == "rope.inv_freq") return OriginalMapping{OriginalTransform::kDrop, {}};
    for (const auto& [dp, op] : kTopLevel)
        if (starts_with(n, op))
            return OriginalMapping{OriginalTransform::kRename, {dp + n.substr(std::strlen(op))}};
    int idx = 0;
    std::string suffix, prefix;
    if (split_block(n, "blocks.", idx, suffix))
        prefix = "transformer_blocks." + std::to_string(idx) + ".";
    else if (split_block(n, "token_refiner.blocks.", idx, suffix))
        prefix = "token_refiner.refiner_blocks." + std::to_string(idx) + ".";
    else
        return std::nullopt;
    if (suffix == "attn.qkv_proj.weight")
        return OriginalMapping{
            OriginalTransform::kSplitQkv,
            {prefix + "attn.to_q.weight", prefix + "attn.to_k.weight", prefix + "attn.to_v.weight"}};
    if (suffix == "mlp.fc1.weight")
        return OriginalMapping{OriginalTransform::kSwapHalves, {prefix + "ff.net.0.proj.weight"}};
    if (suffix == kAdalnBias) return OriginalMapping{OriginalTransform::kRename, {prefix + suffix}};
    for (const auto& [ds, os] : kInBlock)
        if (suffix == os) return OriginalMapping{OriginalTransform::kRename, {prefix + ds}};
    return std::nullopt;
}

} // namespace h3::model
