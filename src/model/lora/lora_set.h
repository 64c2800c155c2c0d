// The adapters one request (or the whole process) applies at run time: every factor placed on the model's
// device in the activation dtype, the user's strength folded into its scale, indexed by block and projection
// so the DiT forward finds a projection's factors with one lookup. A LoraSet is immutable once built and
// shared (std::shared_ptr<const LoraSet>) between the cache that built it and the jobs that use it.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "model/dit/dit_config.h"
#include "model/lora/lora_adapter.h"
#include "ops/context.h"

#include <array>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace h3::model {

struct LoraDeviceFactor {
    Tensor a, b;        // [r, in], [out, r] on the device, activation dtype
    float scale = 1.0f; // format scale × user strength
};
using LoraFactors = std::vector<LoraDeviceFactor>;
using LoraBlockFactors = std::array<LoraFactors, kLoraProjections>; // indexed by LoraProjection

// One adapter and the strength it is applied with (the number after FILE: on the command line, the request's
// "scale").
struct LoraUse {
    std::shared_ptr<const LoraAdapter> adapter;
    float strength = 1.0f;
};

class LoraSet {
public:
    explicit LoraSet(const DitConfig& config);

    // Uploads every factor of every use (strength 0: the use is left out, so it equals no adapter). Targets
    // and shapes are checked against `config`; errors name the adapter and the target.
    static Result<std::shared_ptr<const LoraSet>>
    build(const std::vector<LoraUse>& uses, const DitConfig& config, const ops::Context& ctx, DType dtype);

    // Each part applied with its strength, sharing the parts' device tensors (no copy): a server keeps one
    // set per adapter file at strength 1 and combines them per request. Strength 0 leaves a part out.
    struct Part {
        std::shared_ptr<const LoraSet> set;
        float strength = 1.0f;
    };
    static Result<std::shared_ptr<const LoraSet>> combine(const std::vector<Part>& parts,
                                                          const DitConfig& config);

    // A copy whose DiT-block factors of the six projections (AdaLN's excepted) are f(projection, factor)'s,
    // unchecked against the config: tensor parallel's slices (DitModel::make_tp_lora). The refiner's, the
    // AdaLN and final-layer factors are shared as they are; a factor f returns undefined is left out.
    using FactorMap = std::function<Result<LoraDeviceFactor>(LoraProjection, const LoraDeviceFactor&)>;
    Result<std::shared_ptr<const LoraSet>> map_block_factors(const FactorMap& f) const;

    // Adds one factor made elsewhere (benches: random factors generated on the device). Shapes are checked.
    Status add(const LoraTarget& target, LoraDeviceFactor factor);

    // The block's factors, or null when no adapter touches the block (the forward's fast path).
    const LoraBlockFactors* block(int index) const;
    const LoraBlockFactors* refiner(int index) const;
    const LoraFactors& final_adaln() const { return final_; }

    bool empty() const { return factors_ == 0; }
    size_t factor_count() const { return factors_; }
    int64_t max_rank() const { return max_rank_; }
    size_t device_bytes() const { return bytes_; }
    const std::string& description() const { return description_; } // which files, with which strengths

private:
    DitConfig config_;
    std::vector<LoraBlockFactors> blocks_, refiner_;
    std::vector<bool> block_used_, refiner_used_;
    LoraFactors final_;
    size_t factors_ = 0, bytes_ = 0;
    std::set<const void*> counted_; // shared factors (one A for q, k, v) count once
    int64_t max_rank_ = 0;
    std::string description_;
};

} // namespace h3::model
