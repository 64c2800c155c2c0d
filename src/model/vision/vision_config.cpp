#include "model/vision/vision_config.h"

#include "io/json_file.h"

#include <cmath>

namespace h3::model {

namespace {

Status get_int(const nlohmann::json& j, const std::string& src, const char* section, const char* key,
               int& out, int min_value, bool required) {
    if (!j.contains(key)) {
        if (required) return bad_input(src + ": " + section + " lacks '" + key + "'");
        return ok_status();
    }
    if (!j[key].is_number_integer())
        return bad_input(src + ": " + section + "." + key + " must be an integer");
    const int64_t v = j[key].get<int64_t>();
    if (v < min_value || v > (int64_t(1) << 30))
        return bad_input(src + ": " + section + "." + key + " = " + std::to_string(v) + " is out of range");
    out = static_cast<int>(v);
    return ok_status();
}

} // namespace

int VisionConfig::pos_side() const {
    return static_cast<int>(std::lround(std::sqrt(static_cast<double>(num_position_embeddings))));
}

bool VisionConfig::present(const nlohmann::json& root) {
    return root.is_object() && root.contains("vision_config") && root["vision_config"].is_object();
}

Result<VisionConfig> VisionConfig::from_json(const nlohmann::json& root, const std::string& src) {
    if (!present(root)) return bad_input(src + ": no vision_config object");
    const nlohmann::json& j = root["vision_config"];
    const char* vc = "vision_config";
    VisionConfig c;
    H3_TRY(get_int(j, src, vc, "depth", c.depth, 1, true));
    H3_TRY(get_int(j, src, vc, "hidden_size", c.hidden_size, 1, true));
    H3_TRY(get_int(j, src, vc, "intermediate_size", c.intermediate_size, 1, true));
    H3_TRY(get_int(j, src, vc, "num_heads", c.num_heads, 1, true));
    H3_TRY(get_int(j, src, vc, "in_channels", c.in_channels, 1, false));
    H3_TRY(get_int(j, src, vc, "patch_size", c.patch_size, 1, true));
    H3_TRY(get_int(j, src, vc, "temporal_patch_size", c.temporal_patch_size, 1, false));
    H3_TRY(get_int(j, src, vc, "spatial_merge_size", c.spatial_merge_size, 1, false));
    H3_TRY(get_int(j, src, vc, "out_hidden_size", c.out_hidden_size, 1, true));
    H3_TRY(get_int(j, src, vc, "num_position_embeddings", c.num_position_embeddings, 1, true));
    const char* top = "config";
    H3_TRY(get_int(root, src, top, "image_token_id", c.image_token_id, 0, false));
    H3_TRY(get_int(root, src, top, "vision_start_token_id", c.vision_start_token_id, 0, false));
    H3_TRY(get_int(root, src, top, "vision_end_token_id", c.vision_end_token_id, 0, false));
    H3_TRY(get_int(root, src, top, "video_token_id", c.video_token_id, 0, false));
    if (c.video_token_id == c.image_token_id)
        return bad_input(src + ": video_token_id and image_token_id are both " +
                         std::to_string(c.image_token_id));
    if (c.hidden_size % c.num_heads)
        return bad_input(src + ": vision_config.hidden_size = " + std::to_string(c.hidden_size) +
                         " is not a multiple of num_heads = " + std::to_string(c.num_heads));
    if (c.head_dim() % 4)
        return bad_input(src + ": vision_config head_dim = " + std::to_string(c.head_dim()) +
                         " must be a multiple of 4 (2-D rotary over (h, w))");
    if (c.pos_side() * c.pos_side() != c.num_position_embeddings)
        return bad_input(src + ": vision_config.num_position_embeddings = " +
                         std::to_string(c.num_position_embeddings) + " is not a square");
    if (j.contains("hidden_act") && j["hidden_act"] != "gelu_pytorch_tanh")
        return unimplemented(src + ": vision_config.hidden_act = " + j["hidden_act"].dump() +
                             " (expected \"gelu_pytorch_tanh\")");
    if (j.contains("deepstack_visual_indexes")) {
        if (!j["deepstack_visual_indexes"].is_array())
            return bad_input(src + ": vision_config.deepstack_visual_indexes must be an array");
        c.deepstack_visual_indexes.clear();
        for (const auto& v : j["deepstack_visual_indexes"]) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.depth)
                return bad_input(src + ": vision_config.deepstack_visual_indexes holds " + v.dump() +
                                 ", expected block indexes in [0, depth)");
            c.deepstack_visual_indexes.push_back(v.get<int>());
        }
    }
    return c;
}

Result<VisionConfig> VisionConfig::from_file(const std::string& path) {
    H3_ASSIGN_OR_RETURN(nlohmann::json j, io::read_json_file(path));
    return from_json(j, path);
}

void VisionConfig::add_to_json(nlohmann::json& root) const {
    root["vision_config"] = {{"deepstack_visual_indexes", deepstack_visual_indexes},
                             {"depth", depth},
                             {"hidden_act", "gelu_pytorch_tanh"},
                             {"hidden_size", hidden_size},
                             {"in_channels", in_channels},
                             {"intermediate_size", intermediate_size},
                             {"model_type", "qwen3_vl"},
                             {"num_heads", num_heads},
                             {"num_position_embeddings", num_position_embeddings},
                             {"out_hidden_size", out_hidden_size},
                             {"patch_size", patch_size},
                             {"spatial_merge_size", spatial_merge_size},
                             {"temporal_patch_size", temporal_patch_size}};
    root["image_token_id"] = image_token_id;
    root["vision_start_token_id"] = vision_start_token_id;
    root["vision_end_token_id"] = vision_end_token_id;
    root["video_token_id"] = video_token_id;
}

} // namespace h3::model
