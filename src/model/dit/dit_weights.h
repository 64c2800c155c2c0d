// DiT weights in diffusers form, loaded from either checkpoint format onto one device.
#pragma once

#include "core/tensor.h"
#include "io/checkpoint.h"
#include "model/dit/dit_config.h"
#include "model/dit/dit_tensors.h"

#include <string>
#include <vector>

namespace h3::model {

// Compute precision of a forward. kFp32: every weight and activation in fp32 (the CPU reference mode).
// kBf16: the reference's contract — bf16 block weights and residual stream; fp32 patch projections, time MLP
// and output heads.
enum class DitPrecision { kFp32, kBf16 };
const char* precision_name(DitPrecision p);

struct DitBlockWeights {
    Tensor norm1, to_q, to_k, to_v, norm_q, norm_k, to_out, norm2, ff_in, ff_out;
    Tensor adaln_weight, adaln_bias; // undefined for refiner blocks, or when AdaLN is not loaded
    Tensor gate_compress; // FastH3's VSA compression gate [inner, hidden]; undefined: the branch is off
};

struct DitWeights {
    Tensor proj_in_w, proj_in_b, audio_proj_in_w, audio_proj_in_b;
    Tensor context_w, context_b;
    Tensor time_w1, time_b1, time_w2, time_b2;
    Tensor refiner_final_norm;
    std::vector<DitBlockWeights> refiner;
    std::vector<DitBlockWeights> blocks;
    Tensor norm_out, norm_out_w, norm_out_b;
    Tensor proj_out_w, proj_out_b, audio_proj_out_w, audio_proj_out_b;
    // Every block carries attn.to_gate_compress (a FastH3 student).
    bool has_gate_compress() const { return !blocks.empty() && blocks.front().gate_compress.defined(); }
};

struct DitLoadOptions {
    Device device = Device::cpu();
    DitPrecision precision = DitPrecision::kBf16;
    // false: skip the 50 AdaLN projections (26 GB at full size) — the caller supplies precomputed tables.
    bool load_adaln = true;
};

// A transformer folder (config.json + safetensors, either format). Format is detected from the names.
struct DitCheckpoint {
    DitConfig config;
    DitFormat format = DitFormat::kDiffusers;
    io::TensorSet tensors;
    std::string dir;
};
// `path` is a checkpoint root (either layout: its "transformer" component is used unless `component` names
// another, e.g. "transformer_ref") or a transformer folder.
Result<DitCheckpoint> open_dit_checkpoint(const std::string& path,
                                          const std::string& component = "transformer");

// One diffusers-named tensor, converted for `options` (shape checked against the config, dtype converted,
// copied to the device) — for streaming the AdaLN projections block by block.
Result<Tensor> load_dit_tensor(const DitCheckpoint& ckpt, const std::string& diffusers_name,
                               const DitLoadOptions& options);

// Loads and converts every tensor (original: de-interleaves qkv, swaps fc1 halves); checks each shape against
// the config; converts dtypes for the precision; copies to the device.
Result<DitWeights> load_dit_weights(const DitCheckpoint& ckpt, const DitLoadOptions& options);

} // namespace h3::model
