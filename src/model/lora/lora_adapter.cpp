#include "model/lora/lora_adapter.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <set>
#include <tuple>

namespace h3::model {

namespace {

// Inside a block, in LoraProjection order (kAdaln only in DiT blocks).
constexpr std::array<const char*, kLoraProjections> kProjSuffix = {
    "attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0", "ff.net.0.proj", "ff.net.2", "adaln_proj.linear",
};
constexpr const char* kBlockPrefix = "transformer_blocks.";
constexpr const char* kRefinerPrefix = "token_refiner.refiner_blocks.";
constexpr const char* kFinalAdaln = "norm_out.linear";

bool parse_index(const std::string& s, size_t begin, size_t end, int& out) {
    if (end <= begin || end - begin > 6) return false;
    out = 0;
    for (size_t i = begin; i < end; ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
        out = out * 10 + (s[i] - '0');
    }
    return true;
}

} // namespace

bool LoraTarget::operator<(const LoraTarget& o) const {
    return std::tuple(static_cast<int>(site), index, static_cast<int>(proj)) <
           std::tuple(static_cast<int>(o.site), o.index, static_cast<int>(o.proj));
}

std::string lora_target_name(const LoraTarget& t) {
    if (t.site == LoraSite::kFinalLayer) return kFinalAdaln;
    return std::string(t.site == LoraSite::kBlock ? kBlockPrefix : kRefinerPrefix) + std::to_string(t.index) +
           "." + kProjSuffix[static_cast<size_t>(t.proj)];
}

std::optional<LoraTarget> parse_lora_target(const std::string& n) {
    if (n == kFinalAdaln) return LoraTarget{LoraSite::kFinalLayer, 0, LoraProjection::kAdaln};
    LoraSite site;
    size_t pos;
    if (n.rfind(kBlockPrefix, 0) == 0) {
        site = LoraSite::kBlock;
        pos = std::strlen(kBlockPrefix);
    } else if (n.rfind(kRefinerPrefix, 0) == 0) {
        site = LoraSite::kRefiner;
        pos = std::strlen(kRefinerPrefix);
    } else {
        return std::nullopt;
    }
    const size_t dot = n.find('.', pos);
    int index = 0;
    if (dot == std::string::npos || !parse_index(n, pos, dot, index)) return std::nullopt;
    const std::string suffix = n.substr(dot + 1);
    for (int p = 0; p < kLoraProjections; ++p) {
        if (suffix != kProjSuffix[static_cast<size_t>(p)]) continue;
        if (site == LoraSite::kRefiner && static_cast<LoraProjection>(p) == LoraProjection::kAdaln)
            return std::nullopt;
        return LoraTarget{site, index, static_cast<LoraProjection>(p)};
    }
    return std::nullopt;
}

bool lora_target_exists(const DitConfig& c, const LoraTarget& t) {
    switch (t.site) {
    case LoraSite::kFinalLayer:
        return t.index == 0 && t.proj == LoraProjection::kAdaln;
    case LoraSite::kRefiner:
        return t.index >= 0 && t.index < c.num_refiner_layers && t.proj != LoraProjection::kAdaln;
    case LoraSite::kBlock:
        return t.index >= 0 && t.index < c.num_layers;
    }
    return false;
}

LoraShape lora_target_shape(const DitConfig& c, const LoraTarget& t) {
    const int64_t d = c.hidden_size, inner = c.inner_dim(), f = c.ffn_dim;
    if (t.site == LoraSite::kFinalLayer) return {c.final_adaln_out_features(), c.time_embed_dim};
    switch (t.proj) {
    case LoraProjection::kToQ:
    case LoraProjection::kToK:
    case LoraProjection::kToV:
        return {inner, d};
    case LoraProjection::kToOut:
        return {d, inner};
    case LoraProjection::kFfIn:
        return {2 * f, d};
    case LoraProjection::kFfOut:
        return {d, f};
    case LoraProjection::kAdaln:
        return {c.adaln_out_features(), c.time_embed_dim};
    }
    return {};
}

std::vector<LoraTarget> all_lora_targets(const DitConfig& c) {
    std::vector<LoraTarget> out;
    for (int b = 0; b < c.num_layers; ++b)
        for (int p = 0; p < kLoraProjections; ++p) out.push_back({LoraSite::kBlock, b, LoraProjection(p)});
    for (int b = 0; b < c.num_refiner_layers; ++b)
        for (int p = 0; p < kLoraProjections - 1; ++p)
            out.push_back({LoraSite::kRefiner, b, LoraProjection(p)});
    out.push_back({LoraSite::kFinalLayer, 0, LoraProjection::kAdaln});
    return out;
}

size_t LoraAdapter::host_bytes() const {
    size_t n = 0;
    std::set<const void*> seen; // q/k/v of a fused module may share one A
    for (const auto& f : factors)
        for (const Tensor* t : {&f.a, &f.b})
            if (seen.insert(t->data()).second) n += t->nbytes();
    return n;
}

std::string LoraAdapter::summary() const {
    int64_t rmin = 0, rmax = 0;
    float smin = 0, smax = 0;
    for (size_t i = 0; i < factors.size(); ++i) {
        const LoraFactor& f = factors[i];
        rmin = i ? std::min(rmin, f.rank()) : f.rank();
        rmax = i ? std::max(rmax, f.rank()) : f.rank();
        smin = i ? std::min(smin, f.scale) : f.scale;
        smax = i ? std::max(smax, f.scale) : f.scale;
    }
    auto range = [](double lo, double hi) {
        char buf[64];
        if (lo == hi)
            std::snprintf(buf, sizeof buf, "%g", lo);
        else
            std::snprintf(buf, sizeof buf, "%g-%g", lo, hi);
        return std::string(buf);
    };
    std::string s = source + ": " + format + ", " + std::to_string(factors.size()) + " targets, rank " +
                    range(double(rmin), double(rmax)) + ", alpha/rank " + range(smin, smax);
    if (!ignored.empty()) s += ", " + std::to_string(ignored.size()) + " keys ignored";
    return s;
}

} // namespace h3::model
