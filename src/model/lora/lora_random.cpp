#include "model/lora/lora_random.h"

#include "ops/random.h"

#include <cmath>

namespace h3::model {

Result<LoraAdapter> random_lora_adapter(const DitConfig& c, const RandomLoraParams& p) {
    if (p.rank < 1) return invalid_argument("random LoRA: rank must be at least 1");
    const int blocks = p.blocks > 0 ? std::min(p.blocks, c.num_layers) : c.num_layers;
    const ops::Context cpu = ops::Context::cpu();
    LoraAdapter out;
    out.source = "random rank-" + std::to_string(p.rank);
    out.format = "random";
    uint64_t seed = p.seed;
    std::vector<LoraTarget> targets;
    for (const LoraTarget& t : all_lora_targets(c)) {
        if (t.site == LoraSite::kBlock && t.index >= blocks) continue;
        if (t.site == LoraSite::kRefiner && !p.refiner) continue;
        if (t.proj == LoraProjection::kAdaln && !p.adaln) continue;
        targets.push_back(t);
    }
    for (const LoraTarget& t : targets) {
        LoraFactor f;
        f.target = t;
        f.scale = p.scale;
        const LoraShape s = lora_target_shape(c, f.target);
        f.a = Tensor::host(Shape{p.rank, s.in}, p.dtype);
        f.b = Tensor::host(Shape{s.out, p.rank}, p.dtype);
        // |A x| ~ 1 for unit x; B small, so the delta is ~1% of a unit-scaled projection.
        H3_TRY(ops::fill_uniform(cpu, {.seed = ++seed, .bound = 1.0f / std::sqrt(float(s.in))}, f.a));
        H3_TRY(ops::fill_uniform(cpu, {.seed = ++seed, .bound = 0.01f / std::sqrt(float(p.rank))}, f.b));
        out.factors.push_back(std::move(f));
    }
    return out;
}

} // namespace h3::model
