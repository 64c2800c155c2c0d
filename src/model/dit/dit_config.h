// DitConfig: the H3 transformer's hyper-parameters, read from either config.json flavour.
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <string>

namespace h3::model {

struct DitConfig {
    int num_attention_heads = 56;
    int attention_head_dim = 128;
    int hidden_size = 5376;
    int num_layers = 50;
    int num_refiner_layers = 2;
    int ffn_dim = 14336;
    int in_channels = 24;
    int audio_in_channels = 32;
    int patch_t = 1, patch_h = 2, patch_w = 2;
    int text_dim = 5120;
    int freq_dim = 256;
    int time_embed_hidden_dim = 5376;
    int time_embed_dim = 2688;
    int rope_freq_dim = 16;
    double rope_theta = 10000.0;
    double norm_eps = 1e-5;
    double qk_norm_eps = 1e-5;
    double final_norm_eps = 1e-5;

    int inner_dim() const { return num_attention_heads * attention_head_dim; }
    int video_patch_dim() const { return in_channels * patch_t * patch_h * patch_w; }
    int rotary_dim() const { return 6 * rope_freq_dim; }
    int64_t adaln_out_features() const { return 6LL * 3 * hidden_size; }
    int64_t final_adaln_out_features() const { return 2LL * hidden_size; }

    // Reads diffusers names (hidden_size, num_layers, ffn_dim, ...) or original names
    // (token_refiner_num_layers, ffn_hidden_size, latents_dim, ...). Missing keys keep their defaults only
    // where the official files omit them; inconsistent values are reported.
    static Result<DitConfig> from_json(const nlohmann::json& j, const std::string& origin);
    static Result<DitConfig> from_file(const std::string& path);
    nlohmann::json to_diffusers_json() const;
    nlohmann::json to_original_json() const;
    Status validate(const std::string& origin) const;
};

} // namespace h3::model
