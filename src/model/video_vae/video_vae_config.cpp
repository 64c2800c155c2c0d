// VideoVaeConfig: the vae component's config.json (decoder and encoder fields) read, written and checked.
#include "io/json_file.h"
#include "model/video_vae/video_vae.h"

namespace h3::model {

namespace {

template <typename T>
Status read_field(const nlohmann::json& j, const char* key, T& out, const std::string& origin) {
    if (!j.contains(key)) return ok_status();
    return io::json_get(j.at(key), origin + ": field '" + key + "'", out);
}

// The product of a config's downsample factors (the VAE's patch size along those axes), each factor and the
// product checked before they are multiplied (found by fuzz_config: factors like 512 overflowed the int).
Result<int> downsample_product(const std::vector<int>& factors, const char* key, const std::string& origin) {
    constexpr int64_t kMaxPatch = 1 << 12;
    int64_t p = 1;
    for (size_t i = 0; i < factors.size(); ++i) {
        if (factors[i] < 1 || factors[i] > kMaxPatch)
            return bad_input(origin + ": field '" + key + "'[" + std::to_string(i) + "] is " +
                             std::to_string(factors[i]) + "; a downsample factor lies in [1, " +
                             std::to_string(kMaxPatch) + "]");
        p *= factors[i];
        if (p > kMaxPatch)
            return bad_input(origin + ": field '" + key + "': the factors multiply past " +
                             std::to_string(kMaxPatch) + " (the patch size they make)");
    }
    return static_cast<int>(p);
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
    H3_ASSIGN_OR_RETURN(
        c.patch, downsample_product(c.spatial_downsample_factors, "spatial_downsample_factors", origin));
    H3_ASSIGN_OR_RETURN(
        c.patch_t, downsample_product(c.temporal_downsample_factors, "temporal_downsample_factors", origin));
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
    if (latent_channels < 1 || out_channels < 1 || num_layers < 0 || num_heads < 1 || head_dim < 1 ||
        ffn_mult < 1)
        return bad("decoder sizes must be positive");
    // the derived widths (dim, ffn_dim, patch_dim) are ints: their products are checked before anything
    // computes them
    constexpr int64_t limit = int64_t{1} << 30;
    const auto times = [&](int64_t a, int64_t b) { return a > limit || b > limit ? limit + 1 : a * b; };
    const int64_t width = times(num_heads, head_dim);
    if (width > limit || times(width, ffn_mult) > limit ||
        times(times(times(out_channels, patch_t), patch), patch) > limit)
        return bad("decoder widths overflow: num_heads·head_dim = " + std::to_string(width) + ", ffn_mult " +
                   std::to_string(ffn_mult) + ", out_channels " + std::to_string(out_channels) + " × patch " +
                   std::to_string(patch_t) + "·" + std::to_string(patch) + "² (at most 2^30 each)");
    if (!(rope_dim_ratio >= 0.0 && rope_dim_ratio <= 1.0))
        return bad("decoder_rope_dim_ratio must lie in [0, 1], got " + std::to_string(rope_dim_ratio));
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

} // namespace h3::model
