// How a LoRA file's keys name the DiT's modules, for every layout in circulation:
//   diffusers / PEFT   transformer.transformer_blocks.3.attn.to_q.lora_A.weight  (+ .lora_A.default.weight,
//                      base_model.model. prefix, .alpha scalars)
//   kohya / musubi     lora_unet_transformer_blocks_3_attn_to_q.lora_down.weight | lora_unet_blocks_3_attn_
//                      qkv_proj.lora_up.weight  (+ .alpha): module paths with '.' flattened to '_'
//   original names     blocks.3.attn.qkv_proj.lora_B.weight, diffusion_model. prefix (ComfyUI, ai-toolkit,
//                      larryvrh), mlp.fc1 / mlp.fc2 / attn.out_proj / adaln_proj.linear /
//                      final_layer.adaln_proj.linear
//   DiffSynth          original names with PEFT's .default. infix
//   (blocks.3.attn.qkv_proj.lora_A.default.weight)
// The module vocabulary comes from the DiT's tensor inventory and its one original→diffusers name table
// (model/dit/dit_tensors.h), so a LoRA key is accepted exactly when it names a real DiT Linear.
#pragma once

#include "model/dit/dit_config.h"
#include "model/lora/lora_adapter.h"

#include <map>
#include <string>
#include <vector>

namespace h3::model {

enum class LoraNaming { kDiffusers, kOriginal };
// How a module's B rows map onto the engine's targets.
enum class LoraModuleTransform {
    kDirect,     // one target, same rows
    kSplitQkv,   // fused q/k/v (original attn.qkv_proj, diffusers attn.to_qkv): B rows split three ways
    kSwapHalves, // original mlp.fc1 [gate; value] → ff.net.0.proj [value; gate]
};

struct LoraModule {
    std::string name; // dotted, in its own naming
    LoraNaming naming = LoraNaming::kDiffusers;
    LoraModuleTransform transform = LoraModuleTransform::kDirect;
    std::vector<LoraTarget> targets; // 1, or q, k, v
    int64_t out = 0, in = 0;         // the module's weight shape (fused qkv: 3·inner rows)
    bool adapted = true;             // false: a DiT Linear h3-engine does not adapt (context_embedder, ...)
    bool fused_stacked_only = false; // diffusers attn.to_qkv: always [q_all; k_all; v_all]
};

class LoraVocabulary {
public:
    explicit LoraVocabulary(const DitConfig& config);
    const LoraModule* dotted(const std::string& name) const;
    const LoraModule* flattened(const std::string& name) const; // kohya spelling

private:
    std::vector<LoraModule> modules_;
    std::map<std::string, size_t> dotted_, flattened_;
};

enum class LoraPart { kA, kB, kAlpha };

struct LoraKey {
    std::string key;                    // as in the file
    std::string module_name;            // the module part after prefix stripping (for messages, metadata)
    const LoraModule* module = nullptr; // null: the name is no DiT Linear
    LoraPart part = LoraPart::kA;
    bool recognized = false;   // a LoRA factor or alpha suffix was found
    bool kohya = false;        // lora_unet_ / lora_transformer_ flattened key
    bool peft_default = false; // PEFT's adapter-name infix (.lora_A.default.weight)
    bool variant = false;      // DoRA / LoKr / LoHa / LoCon mid / full diff keys: never applicable as LoRA
};

LoraKey parse_lora_key(const std::string& key, const LoraVocabulary& vocab);

} // namespace h3::model
