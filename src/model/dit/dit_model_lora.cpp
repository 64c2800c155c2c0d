// DitModel::merge_adapters: the merged application of model/lora (every target's weight in place).
#include "model/dit/dit_model.h"
#include "model/lora/lora_apply.h"

#include <cmath>
#include <cstdio>
#include <map>

namespace h3::model {

namespace {

Tensor* target_weight(DitWeights& w, const LoraTarget& t) {
    if (t.site == LoraSite::kFinalLayer) return &w.norm_out_w;
    auto& blocks = t.site == LoraSite::kBlock ? w.blocks : w.refiner;
    if (t.index < 0 || static_cast<size_t>(t.index) >= blocks.size()) return nullptr;
    DitBlockWeights& b = blocks[static_cast<size_t>(t.index)];
    switch (t.proj) {
    case LoraProjection::kToQ:
        return &b.to_q;
    case LoraProjection::kToK:
        return &b.to_k;
    case LoraProjection::kToV:
        return &b.to_v;
    case LoraProjection::kToOut:
        return &b.to_out;
    case LoraProjection::kFfIn:
        return &b.ff_in;
    case LoraProjection::kFfOut:
        return &b.ff_out;
    case LoraProjection::kAdaln:
        return &b.adaln_weight;
    }
    return nullptr;
}

} // namespace

Status DitModel::merge_adapters(const std::vector<LoraUse>& uses) {
    // All terms per target first, so a weight is rounded once however many adapters touch it.
    if (precision_ == DitPrecision::kFp8)
        return invalid_argument(
            "merging LoRA into an fp8 DiT: its e4m3 weights were quantized at load, a merge "
            "would not reach them; apply the adapters at run time instead");
    std::map<LoraTarget, std::vector<LoraMergeTerm>> terms;
    std::string names;
    for (const LoraUse& u : uses) {
        if (!u.adapter) return invalid_argument("merge_adapters: an empty adapter");
        if (!std::isfinite(u.strength))
            return invalid_argument(u.adapter->source + ": LoRA strength is not a finite number");
        char buf[64];
        std::snprintf(buf, sizeof buf, ":%g", static_cast<double>(u.strength));
        names += (names.empty() ? "" : ", ") + u.adapter->source + buf;
        if (u.strength == 0.0f) continue;
        for (const LoraFactor& f : u.adapter->factors) {
            if (!lora_target_exists(config_, f.target))
                return invalid_argument(u.adapter->source + ": LoRA target " + lora_target_name(f.target) +
                                        " is not in this DiT");
            terms[f.target].push_back({&f, u.strength});
        }
    }
    for (auto& [target, list] : terms) {
        Tensor* w = target_weight(weights_, target);
        if (!w || !w->defined())
            return invalid_argument("merging LoRA into " + lora_target_name(target) +
                                    ": that weight is not resident (AdaLN weights not loaded); apply the "
                                    "adapters at run time instead (lora_mode runtime)");
        H3_TRY(lora_merge(ctx_, list, *w).with_context("merging LoRA into " + lora_target_name(target)));
    }
    if (!terms.empty()) merged_ += (merged_.empty() ? "" : ", ") + names;
    return ok_status();
}

} // namespace h3::model
