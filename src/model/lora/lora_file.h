// Reading a LoRA file (safetensors, any published key layout — see lora_keys.h) into the canonical form of
// lora_adapter.h, with the alpha/rank scaling each format defines (as diffusers' lora_conversion_utils does):
//   a per-module .alpha scalar            scale = alpha / rank (the fused rank for a fused qkv module)
//   diffusers' lora_adapter_metadata      scale = lora_alpha / r (alpha_pattern / rank_pattern per module,
//                                          use_rslora: lora_alpha / √r)
//   neither                               scale = 1 (alpha = rank; e.g. larryvrh, ai-toolkit, ModelTC's
//                                          Diffusers-format Turbo files)
// Fused original projections are split onto the engine's diffusers-named targets: attn.qkv_proj shares A and
// splits B's rows (ComfyUI / ai-toolkit / musubi / larryvrh order [q_all; k_all; v_all]; DiffSynth's per-head
// interleave [h: q, k, v] undone), mlp.fc1 swaps B's halves. Rank columns a split part never uses (the
// block-diagonal B of q/k/v factors fused for ComfyUI) are dropped: exact, and cheaper at run time.
#pragma once

#include "core/status.h"
#include "io/safetensors.h"
#include "model/dit/dit_config.h"
#include "model/lora/lora_adapter.h"

#include <map>
#include <string>
#include <vector>

namespace h3::model {

// Row order of a fused qkv_proj module's B.
enum class LoraQkvRows {
    kAuto,    // per-head for DiffSynth files (original names + .default.), stacked otherwise
    kStacked, // [q_all; k_all; v_all]
    kPerHead, // [h0: q, k, v, h1: q, k, v, ...] (the official original checkpoint's qkv_proj rows)
};
const char* qkv_rows_name(LoraQkvRows rows);

struct LoraReadOptions {
    // false: keys that name no adapted projection are skipped with one warning that counts them;
    // true: they are an error that lists them (--lora-strict).
    bool strict = false;
    LoraQkvRows qkv_rows = LoraQkvRows::kAuto;
    // Checked before the header is parsed (its length) and while it is (the tensor count): a file past them
    // is refused at once. max_tensors 0: lora_tensor_limit of the DiT.
    uint64_t max_header_bytes = 16ull << 20;
    size_t max_tensors = 0;
};

// The most tensors a LoRA file for a DiT of `config` may hold: four per adaptable projection in either naming
// (A, B, alpha and a spare) for every block, refiner block and the final layer, plus 4096 keys of other
// components (a text encoder's, which are skipped). 60,000 tensors took 26 s to refuse before this bound.
size_t lora_tensor_limit(const DitConfig& config);

// Reads and converts `path` for a DiT of `config`. Errors name the file and the key or module: not a
// safetensors file, a factor without its partner, rank mismatch between A and B, shapes that do not fit the
// target, non-float factors, non-scalar alpha, DoRA/LoKr/LoHa keys, no adapted projection at all, unknown
// keys when strict.
Result<LoraAdapter> read_lora_file(const std::string& path, const DitConfig& config,
                                   const LoraReadOptions& options = {});

// The same conversion over tensors already in memory (`label` names them in errors).
Result<LoraAdapter> convert_lora_tensors(const std::vector<io::NamedTensor>& tensors,
                                         const std::map<std::string, std::string>& metadata,
                                         const DitConfig& config, const LoraReadOptions& options,
                                         const std::string& label);

// Writes `adapter` in the diffusers/PEFT layout: transformer.<target>.lora_A.weight / .lora_B.weight and an
// f32 .alpha = scale·rank per target (make-tiny --lora; normalizing any layout into one).
Status write_lora_file(const std::string& path, const LoraAdapter& adapter);

} // namespace h3::model
