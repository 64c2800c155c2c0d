#include "model/dit/dit_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace h3::model {

namespace {

Result<double> parse_number(const std::string& key, const std::string& text) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v))
        return invalid_argument("attention vsa: " + key + " '" + text + "' is not a number");
    return v;
}

Result<int> parse_count(const std::string& key, const std::string& text) {
    H3_ASSIGN_OR_RETURN(double v, parse_number(key, text));
    if (v < 0 || v > 1e6 || v != std::floor(v))
        return invalid_argument("attention vsa: " + key + " " + text + " must be a whole number >= 0");
    return static_cast<int>(v);
}

} // namespace

double AttentionChoice::layer_sparsity(int layer, int step) const {
    if (!is_vsa()) return 0.0;
    if (step < vsa.dense_first_n_steps) return 0.0;
    if (std::find(vsa.dense_layers.begin(), vsa.dense_layers.end(), layer) != vsa.dense_layers.end())
        return 0.0;
    return vsa.sparsity;
}

std::string AttentionChoice::describe() const {
    if (!is_vsa()) return "dense";
    std::ostringstream os;
    os << "vsa(sparsity=" << vsa.sparsity
       << ",mode=" << (vsa.mode == VsaMode::kCompete ? "compete" : "exempt");
    if (!vsa.dense_layers.empty()) {
        os << ",dense_layers=";
        for (size_t i = 0; i < vsa.dense_layers.size(); ++i) os << (i ? "/" : "") << vsa.dense_layers[i];
    }
    if (vsa.dense_first_n_steps > 0) os << ",dense_first_n_steps=" << vsa.dense_first_n_steps;
    if (vsa.gate_add == VsaGateAdd::kFused) os << ",gate_add=fused";
    os << ")";
    return os.str();
}

Result<AttentionChoice> parse_attention_choice(const std::string& spec) {
    AttentionChoice c;
    const auto colon = spec.find(':');
    const std::string kind = spec.substr(0, colon);
    if (kind == "dense") {
        if (colon != std::string::npos)
            return invalid_argument("attention dense takes no options, got '" + spec + "'");
        return c;
    }
    if (kind != "vsa")
        return invalid_argument("attention '" + spec +
                                "' must be dense or vsa[:sparsity=0.9,mode=exempt|compete,dense_layers=0/1,"
                                "dense_first_n_steps=N,gate_add=fused|separate]");
    c.kind = AttentionChoice::Kind::kVsa;
    if (colon == std::string::npos) return c;
    std::stringstream fields(spec.substr(colon + 1));
    std::string field;
    while (std::getline(fields, field, ',')) {
        const auto eq = field.find('=');
        if (eq == std::string::npos)
            return invalid_argument("attention vsa: option '" + field + "' must look like key=value");
        const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
        if (key == "sparsity") {
            H3_ASSIGN_OR_RETURN(c.vsa.sparsity, parse_number(key, value));
            if (!(c.vsa.sparsity >= 0.0 && c.vsa.sparsity < 1.0))
                return invalid_argument("attention vsa: sparsity " + value + " must lie in [0, 1)");
        } else if (key == "mode") {
            if (value != "exempt" && value != "compete")
                return invalid_argument("attention vsa: mode '" + value + "' must be exempt or compete");
            c.vsa.mode = value == "compete" ? VsaMode::kCompete : VsaMode::kExempt;
        } else if (key == "dense_layers") {
            c.vsa.dense_layers.clear();
            std::stringstream layers(value);
            std::string layer;
            while (std::getline(layers, layer, '/')) {
                H3_ASSIGN_OR_RETURN(int l, parse_count("dense_layers", layer));
                c.vsa.dense_layers.push_back(l);
            }
        } else if (key == "dense_first_n_steps") {
            H3_ASSIGN_OR_RETURN(c.vsa.dense_first_n_steps, parse_count(key, value));
        } else if (key == "gate_add") {
            if (value != "fused" && value != "separate")
                return invalid_argument("attention vsa: gate_add '" + value + "' must be fused or separate");
            c.vsa.gate_add = value == "separate" ? VsaGateAdd::kSeparate : VsaGateAdd::kFused;
        } else {
            return invalid_argument("attention vsa: unknown option '" + key +
                                    "' (sparsity, mode, dense_layers, dense_first_n_steps, gate_add)");
        }
    }
    return c;
}

} // namespace h3::model
