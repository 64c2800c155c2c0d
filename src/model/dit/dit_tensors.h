// The DiT's tensor inventory in both checkpoint formats, and the single original→diffusers name table.
// Names follow the official index files (../shared/h3-official/transformer/*.index.json and
// FL2VA/transformer/model.safetensors.index.json); test_dit_tensors checks them against those files.
#pragma once

#include "core/dtype.h"
#include "model/dit/dit_config.h"

#include <optional>
#include <string>
#include <vector>

namespace h3::model {

enum class DitFormat { kDiffusers, kOriginal };

struct TensorSpec {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype = DType::kBF16;
};

// Every tensor a checkpoint of this config holds, in a stable order (non-block tensors, refiner blocks,
// then blocks 0..num_layers-1). Dtypes are the official ones: bf16 with the fp32 islands.
std::vector<TensorSpec> dit_tensor_specs(const DitConfig& config, DitFormat format);

// FastH3's per-block gate of the VSA compression branch (spec §11.2, §12 step 6):
// `attn.to_gate_compress.weight` [inner, hidden] bf16, no bias. Not part of the base inventory above: a
// checkpoint holds it for every block or for none (base H3: the branch is off).
std::string gate_compress_name(int block);
TensorSpec gate_compress_spec(const DitConfig& config, int block);

// How one original tensor maps onto diffusers tensors.
enum class OriginalTransform {
    kRename,     // same data, other name
    kSplitQkv,   // per-head interleaved [h: q,k,v] rows → to_q, to_k, to_v
    kSwapHalves, // mlp.fc1 [gate; value] → ff.net.0.proj [value; gate]
    kDrop,       // rope.inv_freq: recomputed from the config
};
struct OriginalMapping {
    OriginalTransform transform = OriginalTransform::kRename;
    std::vector<std::string> diffusers_names; // 1 name, or 3 for kSplitQkv, none for kDrop
};
// nullopt when `original_name` is not a DiT tensor name.
std::optional<OriginalMapping> map_original_name(const std::string& original_name);
// The original name that holds a diffusers tensor (to_q/to_k/to_v → the fused qkv_proj).
std::optional<std::string> original_name_of(const std::string& diffusers_name);

// True for tensors that stay fp32 in the official checkpoint (patch projections, time MLP, output heads).
bool is_fp32_island(const std::string& diffusers_name);

} // namespace h3::model
