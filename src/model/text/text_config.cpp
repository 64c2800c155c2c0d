#include "model/text/text_config.h"

#include "io/json_file.h"

namespace h3::model {

namespace {

Status get_int(const nlohmann::json& j, const std::string& src, const char* key, int& out, int min_value) {
    if (!j.contains(key)) return bad_input(src + ": text_config lacks '" + key + "'");
    if (!j[key].is_number_integer()) return bad_input(src + ": text_config." + key + " must be an integer");
    const int64_t v = j[key].get<int64_t>();
    if (v < min_value || v > (1 << 30))
        return bad_input(src + ": text_config." + key + " = " + std::to_string(v) + " is out of range");
    out = static_cast<int>(v);
    return ok_status();
}

} // namespace

Result<TextConfig> TextConfig::from_json(const nlohmann::json& root, const std::string& src) {
    if (!root.is_object()) return bad_input(src + ": expected a JSON object");
    const nlohmann::json& j = root.contains("text_config") ? root["text_config"] : root;
    if (!j.is_object()) return bad_input(src + ": text_config must be an object");
    TextConfig c;
    H3_TRY(get_int(j, src, "hidden_size", c.hidden_size, 1));
    H3_TRY(get_int(j, src, "intermediate_size", c.intermediate_size, 1));
    H3_TRY(get_int(j, src, "num_hidden_layers", c.num_hidden_layers, 1));
    H3_TRY(get_int(j, src, "num_attention_heads", c.num_attention_heads, 1));
    H3_TRY(get_int(j, src, "num_key_value_heads", c.num_key_value_heads, 1));
    H3_TRY(get_int(j, src, "vocab_size", c.vocab_size, 1));
    if (j.contains("head_dim"))
        H3_TRY(get_int(j, src, "head_dim", c.head_dim, 2));
    else
        c.head_dim = c.hidden_size / c.num_attention_heads;
    if (c.head_dim % 2)
        return bad_input(src + ": text_config.head_dim = " + std::to_string(c.head_dim) + " must be even");
    if (c.num_attention_heads % c.num_key_value_heads)
        return bad_input(
            src + ": text_config.num_attention_heads = " + std::to_string(c.num_attention_heads) +
            " must be a multiple of num_key_value_heads = " + std::to_string(c.num_key_value_heads));
    for (const char* key : {"rms_norm_eps", "rope_theta"}) {
        if (!j.contains(key)) continue;
        if (!j[key].is_number() || !(j[key].get<double>() > 0))
            return bad_input(src + ": text_config." + key + " must be a positive number");
    }
    c.rms_norm_eps = j.value("rms_norm_eps", 1e-6);
    c.rope_theta = j.value("rope_theta", 1e6);
    // transformers 5 moves rope_theta into rope_parameters / rope_scaling; accept it there too.
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
        if (!j.contains(key) || !j[key].is_object()) continue;
        const auto& r = j[key];
        if (r.contains("rope_theta") && r["rope_theta"].is_number())
            c.rope_theta = r["rope_theta"].get<double>();
        if (r.contains("rope_type") && r["rope_type"] != "default")
            return unimplemented(src + ": text_config." + key + ".rope_type = " + r["rope_type"].dump() +
                                 " (only \"default\" is supported)");
        if (r.contains("mrope_section") && r["mrope_section"].is_array()) {
            c.mrope_section.clear();
            int sum = 0;
            for (const auto& v : r["mrope_section"]) {
                int section = 0;
                H3_TRY(io::json_int(v, src + ": text_config." + key + ".mrope_section", section, 0, 1 << 20));
                c.mrope_section.push_back(section);
                sum += c.mrope_section.back();
            }
            if (sum != c.head_dim / 2)
                return bad_input(src + ": mrope_section sums to " + std::to_string(sum) +
                                 ", expected head_dim/2 = " + std::to_string(c.head_dim / 2));
        }
    }
    if (j.contains("attention_bias") && j["attention_bias"].is_boolean() && j["attention_bias"].get<bool>())
        return unimplemented(src + ": text_config.attention_bias = true is not supported");
    if (j.contains("hidden_act") && j["hidden_act"] != "silu")
        return unimplemented(src + ": text_config.hidden_act = " + j["hidden_act"].dump() +
                             " (expected \"silu\")");
    return c;
}

Result<TextConfig> TextConfig::from_file(const std::string& path) {
    H3_ASSIGN_OR_RETURN(nlohmann::json j, io::read_json_file(path));
    return from_json(j, path);
}

nlohmann::json TextConfig::to_json() const {
    nlohmann::json t = {
        {"attention_bias", false},
        {"head_dim", head_dim},
        {"hidden_act", "silu"},
        {"hidden_size", hidden_size},
        {"intermediate_size", intermediate_size},
        {"model_type", "qwen3_vl_text"},
        {"num_attention_heads", num_attention_heads},
        {"num_hidden_layers", num_hidden_layers},
        {"num_key_value_heads", num_key_value_heads},
        {"rms_norm_eps", rms_norm_eps},
        {"rope_scaling",
         {{"mrope_interleaved", true}, {"mrope_section", mrope_section}, {"rope_type", "default"}}},
        {"rope_theta", rope_theta},
        {"vocab_size", vocab_size},
        {"dtype", "bfloat16"}};
    return {{"architectures", {"Qwen3VLForConditionalGeneration"}},
            {"model_type", "qwen3_vl"},
            {"text_config", t}};
}

} // namespace h3::model
