#include "model/dit/dit_config.h"

#include "io/json_file.h"

namespace h3::model {

namespace {

// Reads an int under the diffusers name or the original name; records which one was used.
Status read_int(const nlohmann::json& j, const std::string& origin, const char* name, const char* alt,
                int& out) {
    for (const char* key : {name, alt}) {
        if (!key || !j.contains(key)) continue;
        return io::json_int(j.at(key), origin + ": field '" + key + "'", out);
    }
    return ok_status();
}

Status read_double(const nlohmann::json& j, const std::string& origin, const char* name, double& out) {
    if (!j.contains(name)) return ok_status();
    if (!j.at(name).is_number()) return bad_input(origin + ": field '" + name + "' must be a number");
    out = j.at(name).get<double>();
    return ok_status();
}

} // namespace

Result<DitConfig> DitConfig::from_json(const nlohmann::json& j, const std::string& origin) {
    if (!j.is_object()) return bad_input(origin + ": transformer config must be a JSON object");
    DitConfig c;
    H3_TRY(read_int(j, origin, "num_attention_heads", nullptr, c.num_attention_heads));
    H3_TRY(read_int(j, origin, "attention_head_dim", nullptr, c.attention_head_dim));
    H3_TRY(read_int(j, origin, "hidden_size", nullptr, c.hidden_size));
    H3_TRY(read_int(j, origin, "num_layers", nullptr, c.num_layers));
    H3_TRY(read_int(j, origin, "num_refiner_layers", "token_refiner_num_layers", c.num_refiner_layers));
    H3_TRY(read_int(j, origin, "ffn_dim", "ffn_hidden_size", c.ffn_dim));
    H3_TRY(read_int(j, origin, "in_channels", "latents_dim", c.in_channels));
    H3_TRY(read_int(j, origin, "audio_in_channels", "audio_latents_dim", c.audio_in_channels));
    H3_TRY(read_int(j, origin, "text_dim", nullptr, c.text_dim));
    H3_TRY(read_int(j, origin, "freq_dim", "timestep_input_dim", c.freq_dim));
    H3_TRY(read_int(j, origin, "time_embed_hidden_dim", "time_embed_hidden_size", c.time_embed_hidden_dim));
    H3_TRY(read_int(j, origin, "time_embed_dim", nullptr, c.time_embed_dim));
    H3_TRY(read_int(j, origin, "rope_freq_dim", "rope_inv_freq_len", c.rope_freq_dim));
    H3_TRY(read_double(j, origin, "rope_theta", c.rope_theta));
    H3_TRY(read_double(j, origin, "norm_eps", c.norm_eps));
    H3_TRY(read_double(j, origin, "qk_norm_eps", c.qk_norm_eps));
    H3_TRY(read_double(j, origin, "final_norm_eps", c.final_norm_eps));
    if (j.contains("patch_size")) {
        const auto& p = j.at("patch_size");
        if (!p.is_array() || p.size() != 3)
            return bad_input(origin + ": 'patch_size' must be an array of 3 integers");
        H3_TRY(io::json_int(p[0], origin + ": patch_size[0]", c.patch_t));
        H3_TRY(io::json_int(p[1], origin + ": patch_size[1]", c.patch_h));
        H3_TRY(io::json_int(p[2], origin + ": patch_size[2]", c.patch_w));
    }
    H3_TRY(c.validate(origin));
    // The original config states the AdaLN widths explicitly; they must agree with the derived ones.
    if (j.contains("adaln_out_features") && j.at("adaln_out_features").is_number_integer() &&
        j.at("adaln_out_features").get<int64_t>() != c.adaln_out_features())
        return bad_input(origin + ": adaln_out_features " + j.at("adaln_out_features").dump() +
                         " disagrees with 6·3·hidden_size = " + std::to_string(c.adaln_out_features()));
    if (j.contains("final_adaln_out_features") && j.at("final_adaln_out_features").is_number_integer() &&
        j.at("final_adaln_out_features").get<int64_t>() != c.final_adaln_out_features())
        return bad_input(origin + ": final_adaln_out_features disagrees with 2·hidden_size = " +
                         std::to_string(c.final_adaln_out_features()));
    return c;
}

Result<DitConfig> DitConfig::from_file(const std::string& path) {
    H3_ASSIGN_OR_RETURN(auto j, io::read_json_file(path));
    return from_json(j, path);
}

Status DitConfig::validate(const std::string& origin) const {
    auto positive = [&](int v, const char* name) -> Status {
        if (v <= 0) return bad_input(origin + ": '" + name + "' must be positive, got " + std::to_string(v));
        return ok_status();
    };
    H3_TRY(positive(num_attention_heads, "num_attention_heads"));
    H3_TRY(positive(attention_head_dim, "attention_head_dim"));
    H3_TRY(positive(hidden_size, "hidden_size"));
    H3_TRY(positive(num_layers, "num_layers"));
    H3_TRY(positive(ffn_dim, "ffn_dim"));
    H3_TRY(positive(in_channels, "in_channels"));
    H3_TRY(positive(audio_in_channels, "audio_in_channels"));
    H3_TRY(positive(text_dim, "text_dim"));
    H3_TRY(positive(freq_dim, "freq_dim"));
    H3_TRY(positive(time_embed_hidden_dim, "time_embed_hidden_dim"));
    H3_TRY(positive(time_embed_dim, "time_embed_dim"));
    H3_TRY(positive(rope_freq_dim, "rope_freq_dim"));
    if (num_refiner_layers < 0) return bad_input(origin + ": 'num_refiner_layers' must be >= 0");
    if (freq_dim % 2) return bad_input(origin + ": 'freq_dim' must be even (cos and sin halves)");
    if (attention_head_dim % 2) return bad_input(origin + ": 'attention_head_dim' must be even");
    if (rotary_dim() > attention_head_dim)
        return bad_input(origin + ": 6·rope_freq_dim = " + std::to_string(rotary_dim()) +
                         " exceeds attention_head_dim " + std::to_string(attention_head_dim));
    if (patch_t != 1 || patch_h <= 0 || patch_w <= 0)
        return bad_input(origin + ": patch_size must be [1, ph, pw] with ph, pw > 0");
    return ok_status();
}

nlohmann::json DitConfig::to_diffusers_json() const {
    return {{"_class_name", "MiniMaxH3Transformer3DModel"},
            {"_diffusers_version", "0.36.0.dev0"},
            {"num_attention_heads", num_attention_heads},
            {"attention_head_dim", attention_head_dim},
            {"hidden_size", hidden_size},
            {"num_layers", num_layers},
            {"num_refiner_layers", num_refiner_layers},
            {"ffn_dim", ffn_dim},
            {"in_channels", in_channels},
            {"audio_in_channels", audio_in_channels},
            {"patch_size", {patch_t, patch_h, patch_w}},
            {"text_dim", text_dim},
            {"freq_dim", freq_dim},
            {"time_embed_hidden_dim", time_embed_hidden_dim},
            {"time_embed_dim", time_embed_dim},
            {"rope_freq_dim", rope_freq_dim},
            {"rope_theta", rope_theta},
            {"norm_eps", norm_eps},
            {"qk_norm_eps", qk_norm_eps},
            {"final_norm_eps", final_norm_eps}};
}

nlohmann::json DitConfig::to_original_json() const {
    return {{"_class_name", "MiniMaxH3DiTModel"},
            {"_diffusers_version", "0.32.2"},
            {"hidden_size", hidden_size},
            {"num_layers", num_layers},
            {"token_refiner_num_layers", num_refiner_layers},
            {"num_attention_heads", num_attention_heads},
            {"attention_head_dim", attention_head_dim},
            {"ffn_hidden_size", ffn_dim},
            {"latents_dim", in_channels},
            {"audio_latents_dim", audio_in_channels},
            {"patch_size", {patch_t, patch_h, patch_w}},
            {"text_dim", text_dim},
            {"timestep_input_dim", freq_dim},
            {"time_embed_hidden_size", time_embed_hidden_dim},
            {"time_embed_dim", time_embed_dim},
            {"adaln_out_features", adaln_out_features()},
            {"final_adaln_out_features", final_adaln_out_features()},
            {"rope_inv_freq_len", rope_freq_dim},
            {"norm_eps", norm_eps},
            {"qk_norm_eps", qk_norm_eps},
            {"final_norm_eps", final_norm_eps}};
}

} // namespace h3::model
