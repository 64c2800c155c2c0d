#include "model/lora/lora_set.h"

#include <cmath>
#include <cstdio>
#include <map>

namespace h3::model {

LoraSet::LoraSet(const DitConfig& config)
    : config_(config), blocks_(static_cast<size_t>(config.num_layers)),
      refiner_(static_cast<size_t>(config.num_refiner_layers)),
      block_used_(static_cast<size_t>(config.num_layers), false),
      refiner_used_(static_cast<size_t>(config.num_refiner_layers), false) {}

Status LoraSet::add(const LoraTarget& t, LoraDeviceFactor f) {
    const std::string name = lora_target_name(t);
    if (!lora_target_exists(config_, t))
        return invalid_argument("LoRA target " + name + " is not in this DiT");
    const LoraShape s = lora_target_shape(config_, t);
    if (f.a.rank() != 2 || f.b.rank() != 2 || f.a.dim(1) != s.in || f.b.dim(0) != s.out ||
        f.b.dim(1) != f.a.dim(0) || f.a.dim(0) < 1)
        return invalid_argument("LoRA factor for " + name + " is A " + f.a.shape().to_string() + ", B " +
                                f.b.shape().to_string() + "; the target's weight is [" +
                                std::to_string(s.out) + ", " + std::to_string(s.in) + "]");
    if (!std::isfinite(f.scale)) return invalid_argument("LoRA scale for " + name + " is not finite");
    max_rank_ = std::max(max_rank_, f.a.dim(0));
    for (const Tensor* x : {&f.a, &f.b})
        if (counted_.insert(x->data()).second) bytes_ += x->nbytes();
    ++factors_;
    const size_t p = static_cast<size_t>(t.proj), i = static_cast<size_t>(t.index);
    switch (t.site) {
    case LoraSite::kBlock:
        blocks_[i][p].push_back(std::move(f));
        block_used_[i] = true;
        break;
    case LoraSite::kRefiner:
        refiner_[i][p].push_back(std::move(f));
        refiner_used_[i] = true;
        break;
    case LoraSite::kFinalLayer:
        final_.push_back(std::move(f));
        break;
    }
    return ok_status();
}

const LoraBlockFactors* LoraSet::block(int index) const {
    const size_t i = static_cast<size_t>(index);
    return i < blocks_.size() && block_used_[i] ? &blocks_[i] : nullptr;
}

const LoraBlockFactors* LoraSet::refiner(int index) const {
    const size_t i = static_cast<size_t>(index);
    return i < refiner_.size() && refiner_used_[i] ? &refiner_[i] : nullptr;
}

Result<std::shared_ptr<const LoraSet>> LoraSet::build(const std::vector<LoraUse>& uses,
                                                      const DitConfig& config, const ops::Context& ctx,
                                                      DType dtype) {
    auto set = std::make_shared<LoraSet>(config);
    // q, k and v of a fused module share one A: upload it once.
    std::map<const void*, Tensor> uploaded;
    auto upload = [&](const Tensor& host) -> Result<Tensor> {
        auto it = uploaded.find(host.data());
        if (it != uploaded.end()) return it->second;
        Tensor t = host; // adapters are immutable: a CPU set may share their memory
        if (host.dtype() != dtype) {
            H3_ASSIGN_OR_RETURN(t, host.to_dtype(dtype));
        }
        if (!ctx.device.is_cpu()) {
            H3_ASSIGN_OR_RETURN(t, t.to(ctx.device, ctx.stream()));
        }
        uploaded[host.data()] = t;
        return t;
    };
    for (const LoraUse& u : uses) {
        if (!u.adapter) return invalid_argument("LoRA set: an empty adapter");
        if (!std::isfinite(u.strength))
            return invalid_argument(u.adapter->source + ": LoRA strength is not a finite number");
        char buf[64];
        std::snprintf(buf, sizeof buf, ":%g", static_cast<double>(u.strength));
        set->description_ += (set->description_.empty() ? "" : ", ") + u.adapter->source + buf;
        if (u.strength == 0.0f) continue;
        for (const LoraFactor& f : u.adapter->factors) {
            LoraDeviceFactor d;
            H3_ASSIGN_OR_RETURN(d.a, upload(f.a));
            H3_ASSIGN_OR_RETURN(d.b, upload(f.b));
            d.scale = f.scale * u.strength;
            if (Status s = set->add(f.target, std::move(d)); !s.ok())
                return s.with_context(u.adapter->source);
        }
    }
    return std::shared_ptr<const LoraSet>(std::move(set));
}

Result<std::shared_ptr<const LoraSet>> LoraSet::combine(const std::vector<Part>& parts,
                                                        const DitConfig& config) {
    auto set = std::make_shared<LoraSet>(config);
    for (const Part& p : parts) {
        if (!p.set) return invalid_argument("LoRA set: an empty part");
        if (!std::isfinite(p.strength)) return invalid_argument("LoRA strength is not a finite number");
        char buf[64];
        std::snprintf(buf, sizeof buf, "*%g", static_cast<double>(p.strength));
        set->description_ += (set->description_.empty() ? "" : ", ") + p.set->description_ + buf;
        if (p.strength == 0.0f) continue;
        auto copy = [&](const LoraTarget& t, const LoraFactors& fs) -> Status {
            for (const LoraDeviceFactor& f : fs) H3_TRY(set->add(t, {f.a, f.b, f.scale * p.strength}));
            return ok_status();
        };
        for (size_t b = 0; b < p.set->blocks_.size(); ++b)
            for (int q = 0; q < kLoraProjections; ++q)
                H3_TRY(copy({LoraSite::kBlock, static_cast<int>(b), LoraProjection(q)},
                            p.set->blocks_[b][size_t(q)]));
        for (size_t b = 0; b < p.set->refiner_.size(); ++b)
            for (int q = 0; q < kLoraProjections; ++q)
                H3_TRY(copy({LoraSite::kRefiner, static_cast<int>(b), LoraProjection(q)},
                            p.set->refiner_[b][size_t(q)]));
        H3_TRY(copy({LoraSite::kFinalLayer, 0, LoraProjection::kAdaln}, p.set->final_));
    }
    return std::shared_ptr<const LoraSet>(std::move(set));
}

Result<std::shared_ptr<const LoraSet>> LoraSet::map_block_factors(const FactorMap& f) const {
    auto set = std::make_shared<LoraSet>(*this);
    for (auto& block : set->blocks_)
        for (int q = 0; q < kLoraProjections; ++q) {
            if (LoraProjection(q) == LoraProjection::kAdaln) continue;
            LoraFactors mapped;
            for (const LoraDeviceFactor& d : block[size_t(q)]) {
                H3_ASSIGN_OR_RETURN(LoraDeviceFactor m, f(LoraProjection(q), d));
                if (m.a.defined() && m.b.defined()) mapped.push_back(std::move(m));
            }
            block[size_t(q)] = std::move(mapped);
        }
    // What the copy holds: every distinct factor tensor once.
    set->counted_.clear();
    set->bytes_ = 0;
    set->factors_ = 0;
    auto count = [&](const LoraFactors& fs) {
        for (const LoraDeviceFactor& d : fs) {
            ++set->factors_;
            for (const Tensor* x : {&d.a, &d.b})
                if (set->counted_.insert(x->data()).second) set->bytes_ += x->nbytes();
        }
    };
    for (const auto* sites : {&set->blocks_, &set->refiner_})
        for (const LoraBlockFactors& b : *sites)
            for (const LoraFactors& fs : b) count(fs);
    count(set->final_);
    return std::shared_ptr<const LoraSet>(std::move(set));
}

} // namespace h3::model
