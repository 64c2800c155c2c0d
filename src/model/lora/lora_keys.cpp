#include "model/lora/lora_keys.h"

#include "model/dit/dit_tensors.h"

#include <array>
#include <cstring>

namespace h3::model {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string flatten(std::string s) {
    for (char& c : s)
        if (c == '.') c = '_';
    return s;
}

// Component prefixes trainers put in front of the module path (at most one is stripped).
constexpr std::array<const char*, 7> kPrefixes = {
    "base_model.model.transformer.",
    "base_model.model.",
    "model.diffusion_model.",
    "diffusion_model.",
    "transformer_ref.",
    "transformer.",
    "model.",
};
constexpr std::array<const char*, 2> kKohyaPrefixes = {"lora_unet_", "lora_transformer_"};

struct Suffix {
    const char* text;
    LoraPart part;
    bool peft_default;
};
// Longest first: ".lora_A.default.weight" before ".lora_A.weight".
constexpr std::array<Suffix, 9> kSuffixes = {{
    {".lora_A.default.weight", LoraPart::kA, true},
    {".lora_B.default.weight", LoraPart::kB, true},
    {".lora_A.weight", LoraPart::kA, false},
    {".lora_B.weight", LoraPart::kB, false},
    {".lora_down.weight", LoraPart::kA, false},
    {".lora_up.weight", LoraPart::kB, false},
    {".lora.down.weight", LoraPart::kA, false},
    {".lora.up.weight", LoraPart::kB, false},
    {".alpha", LoraPart::kAlpha, false},
}};
// Adapter kinds whose extra tensors change what the delta means: applying only their plain factors would be
// wrong, so a file carrying them is refused.
constexpr std::array<const char*, 8> kVariantMarkers = {
    "dora_scale", "lora_magnitude_vector", ".lokr_", ".hada_", ".lora_mid.", ".oft_", ".diff_b", ".w_norm",
};

} // namespace

LoraVocabulary::LoraVocabulary(const DitConfig& c) {
    auto add = [&](LoraModule m) {
        const size_t i = modules_.size();
        dotted_[m.name] = i;
        flattened_[flatten(m.name)] = i;
        modules_.push_back(std::move(m));
    };
    for (const auto& s : dit_tensor_specs(c, DitFormat::kDiffusers)) {
        if (s.shape.size() != 2 || !ends_with(s.name, ".weight")) continue;
        LoraModule m;
        m.name = s.name.substr(0, s.name.size() - 7);
        m.out = s.shape[0];
        m.in = s.shape[1];
        auto t = parse_lora_target(m.name);
        m.adapted = t.has_value();
        if (t) m.targets = {*t};
        add(std::move(m));
    }
    for (const auto& s : dit_tensor_specs(c, DitFormat::kOriginal)) {
        if (s.shape.size() != 2 || !ends_with(s.name, ".weight")) continue;
        auto mapping = map_original_name(s.name);
        if (!mapping || mapping->transform == OriginalTransform::kDrop) continue;
        LoraModule m;
        m.name = s.name.substr(0, s.name.size() - 7);
        m.naming = LoraNaming::kOriginal;
        m.out = s.shape[0];
        m.in = s.shape[1];
        m.transform = mapping->transform == OriginalTransform::kSplitQkv ? LoraModuleTransform::kSplitQkv
                      : mapping->transform == OriginalTransform::kSwapHalves
                          ? LoraModuleTransform::kSwapHalves
                          : LoraModuleTransform::kDirect;
        m.adapted = true;
        for (const auto& dn : mapping->diffusers_names) {
            auto t = parse_lora_target(dn.substr(0, dn.size() - 7));
            if (!t) {
                m.adapted = false;
                m.targets.clear();
                break;
            }
            m.targets.push_back(*t);
        }
        if (dotted_.count(m.name)) continue; // same name in both layouts (adaln_proj.linear inside a block)
        add(std::move(m));
    }
    // diffusers' fused projection (fuse_qkv_projections): [q_all; k_all; v_all] rows.
    auto fused = [&](const std::string& prefix, LoraSite site, int index) {
        LoraModule m;
        m.name = prefix + std::to_string(index) + ".attn.to_qkv";
        m.transform = LoraModuleTransform::kSplitQkv;
        m.fused_stacked_only = true;
        m.out = 3LL * c.inner_dim();
        m.in = c.hidden_size;
        for (auto p : {LoraProjection::kToQ, LoraProjection::kToK, LoraProjection::kToV})
            m.targets.push_back({site, index, p});
        add(std::move(m));
    };
    for (int b = 0; b < c.num_layers; ++b) fused("transformer_blocks.", LoraSite::kBlock, b);
    for (int b = 0; b < c.num_refiner_layers; ++b)
        fused("token_refiner.refiner_blocks.", LoraSite::kRefiner, b);
}

const LoraModule* LoraVocabulary::dotted(const std::string& name) const {
    auto it = dotted_.find(name);
    return it == dotted_.end() ? nullptr : &modules_[it->second];
}

const LoraModule* LoraVocabulary::flattened(const std::string& name) const {
    auto it = flattened_.find(name);
    return it == flattened_.end() ? nullptr : &modules_[it->second];
}

LoraKey parse_lora_key(const std::string& key, const LoraVocabulary& vocab) {
    LoraKey k;
    k.key = key;
    for (const char* marker : kVariantMarkers)
        if (key.find(marker) != std::string::npos) k.variant = true;
    if (ends_with(key, ".diff")) k.variant = true;
    for (const char* p : kKohyaPrefixes) {
        if (key.rfind(p, 0) != 0) continue;
        k.kohya = true;
        const size_t dot = key.find('.');
        const std::string flat =
            key.substr(std::strlen(p), dot == std::string::npos ? std::string::npos : dot - std::strlen(p));
        const std::string rest = dot == std::string::npos ? "" : key.substr(dot);
        for (const Suffix& s : kSuffixes)
            if (rest == s.text) {
                k.recognized = true;
                k.part = s.part;
            }
        k.module_name = flat;
        k.module = vocab.flattened(flat);
        return k;
    }
    std::string rest = key;
    for (const Suffix& s : kSuffixes) {
        if (!ends_with(rest, s.text)) continue;
        k.recognized = true;
        k.part = s.part;
        k.peft_default = s.peft_default;
        rest = rest.substr(0, rest.size() - std::strlen(s.text));
        break;
    }
    for (const char* p : kPrefixes)
        if (rest.rfind(p, 0) == 0) {
            rest = rest.substr(std::strlen(p));
            break;
        }
    k.module_name = rest;
    k.module = vocab.dotted(rest);
    return k;
}

} // namespace h3::model
