// LoRA adapters in the engine's canonical form: per adapted projection (named like the engine's diffusers
// tensors) a factor pair A [r, in], B [out, r] and a scale, so that the projection's weight becomes
// W + scale·B·A. Every published key format is converted onto this form by lora_file.h; the run-time and the
// merged application (lora_apply.h) only ever see it.
#pragma once

#include "core/tensor.h"
#include "model/dit/dit_config.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace h3::model {

// The projections an adapter may target. q/k/v/out and the FFN in/out exist in every DiT and refiner block;
// the AdaLN projection in every DiT block and in the final layer (norm_out.linear).
enum class LoraProjection { kToQ = 0, kToK, kToV, kToOut, kFfIn, kFfOut, kAdaln };
constexpr int kLoraProjections = 7;
enum class LoraSite { kBlock, kRefiner, kFinalLayer };

struct LoraTarget {
    LoraSite site = LoraSite::kBlock;
    int index = 0; // block or refiner block; 0 for the final layer
    LoraProjection proj = LoraProjection::kToQ;
    bool operator==(const LoraTarget& o) const = default;
    bool operator<(const LoraTarget& o) const;
};

// The diffusers module name: "transformer_blocks.3.attn.to_q", "token_refiner.refiner_blocks.0.ff.net.2",
// "transformer_blocks.7.adaln_proj.linear", "norm_out.linear".
std::string lora_target_name(const LoraTarget& target);
// Inverse of lora_target_name; nullopt for any other name (indices are not range-checked here).
std::optional<LoraTarget> parse_lora_target(const std::string& diffusers_module);
// True when the config has this target (index in range; refiner blocks have no AdaLN projection).
bool lora_target_exists(const DitConfig& config, const LoraTarget& target);
// [out, in] of the target's weight.
struct LoraShape {
    int64_t out = 0, in = 0;
};
LoraShape lora_target_shape(const DitConfig& config, const LoraTarget& target);
// Every target of the config in a stable order (blocks, refiner blocks, final layer).
std::vector<LoraTarget> all_lora_targets(const DitConfig& config);

// One adapted projection: W += scale·B·A. A [r, in] and B [out, r] are contiguous host tensors in the file's
// float dtype (the conversions are row permutations, so no value changes).
struct LoraFactor {
    LoraTarget target;
    Tensor a, b;
    float scale = 1.0f; // alpha / rank as the format defines it (the user's strength is applied later)
    int64_t rank() const { return a.dim(0); }
};

// One adapter file after conversion.
struct LoraAdapter {
    std::string source;               // the file it came from
    std::string format;               // diffusers | peft | kohya | musubi | original | diffsynth | mixed
    std::vector<LoraFactor> factors;  // sorted by target; a target appears at most once per module key
    std::vector<std::string> ignored; // keys skipped in non-strict mode (unknown names, unadapted targets)
    size_t host_bytes() const;        // memory the factors hold
    // "file.safetensors: peft, 312 targets, rank 128, alpha/rank 0.0625, 3 keys ignored"
    std::string summary() const;
};

} // namespace h3::model
