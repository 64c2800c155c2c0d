// Qwen3-VL language-model config (the `text_config` section of text_encoder/config.json, spec §8.1).
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace h3::model {

struct TextConfig {
    int hidden_size = 5120;
    int intermediate_size = 25600;
    int num_hidden_layers = 64;
    int num_attention_heads = 64;
    int num_key_value_heads = 8;
    int head_dim = 128;
    int vocab_size = 151936;
    double rms_norm_eps = 1e-6;
    double rope_theta = 5e6;
    std::vector<int> mrope_section{24, 20, 20}; // informational: text-only positions make it 1-D RoPE

    // Layers the conditioner runs: 0..min(50, num_hidden_layers)-1; output = hidden_states[that count].
    static constexpr int kConditionerLayers = 50;
    int used_layers() const {
        return num_hidden_layers < kConditionerLayers ? num_hidden_layers : kConditionerLayers;
    }

    // From a parsed config.json: its `text_config` object, or the object itself when it has none. Errors
    // name `source` and the field.
    static Result<TextConfig> from_json(const nlohmann::json& j, const std::string& source);
    static Result<TextConfig> from_file(const std::string& path);
    // The official Qwen3-VL-32B text config (spec §8.1).
    static TextConfig official() { return TextConfig{}; }
    // A config.json in the official layout ({"model_type": "qwen3_vl", "text_config": {...}}).
    nlohmann::json to_json() const;
};

} // namespace h3::model
