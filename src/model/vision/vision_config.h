// Qwen3-VL vision tower config (the `vision_config` section of text_encoder/config.json, plus the vision
// token ids of the top-level config), spec §8.1.
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace h3::model {

struct VisionConfig {
    int depth = 27;
    int hidden_size = 1152;
    int intermediate_size = 4304;
    int num_heads = 16;
    int in_channels = 3;
    int patch_size = 16;
    int temporal_patch_size = 2;
    int spatial_merge_size = 2;
    int out_hidden_size = 5120;
    int num_position_embeddings = 2304; // a square table: side = sqrt(n)
    std::vector<int> deepstack_visual_indexes{8, 16, 24};
    // Top-level token ids (Qwen3-VL's tokenizer).
    int image_token_id = 151655;
    int vision_start_token_id = 151652;
    int vision_end_token_id = 151653;
    int video_token_id = 151656; // <|video_pad|> (ref2va video blocks)

    int head_dim() const { return hidden_size / num_heads; }
    int patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
    int merge_unit() const { return spatial_merge_size * spatial_merge_size; }
    int pos_side() const; // sqrt(num_position_embeddings)

    // True when the parsed config.json has a `vision_config` object.
    static bool present(const nlohmann::json& root);
    // From the parsed top-level config.json. Errors name `source` and the field.
    static Result<VisionConfig> from_json(const nlohmann::json& root, const std::string& source);
    static Result<VisionConfig> from_file(const std::string& path);
    static VisionConfig official() { return VisionConfig{}; }
    // Adds `vision_config` and the token ids to a config.json object (TextConfig::to_json's layout).
    void add_to_json(nlohmann::json& root) const;
};

} // namespace h3::model
