// DiT weights in diffusers form, loaded from either checkpoint format onto one device.
#pragma once

#include "core/tensor.h"
#include "io/checkpoint.h"
#include "model/dit/dit_config.h"
#include "model/dit/dit_tensors.h"
#include "model/weights/residency.h"

#include <functional>

#include <string>
#include <vector>

namespace h3::model {

// Compute precision of a forward. kFp32: every weight and activation in fp32 (the CPU reference mode).
// kBf16: the reference's contract — bf16 block weights and residual stream; fp32 patch projections, time MLP
// and output heads. kFp16 (GPUs without bf16, sm_70/sm_75): fp16 weights and activations with an fp32
// residual stream and the same fp32 islands and outputs; a weight that overflows fp16 is refused at load.
enum class DitPrecision { kFp32, kBf16, kFp16 };
const char* precision_name(DitPrecision p); // "fp32" | "bf16" | "fp16"
// "fp32" | "bf16" | "fp16"; errors name `field`.
Result<DitPrecision> parse_precision(const std::string& text, const std::string& field = "dtype");
// Weights and activations of `p` (f32 / bf16 / f16), and its residual stream (f32 for kFp16).
DType precision_dtype(DitPrecision p);
DType residual_dtype(DitPrecision p);

struct DitBlockWeights {
    Tensor norm1, to_q, to_k, to_v, norm_q, norm_k, to_out, norm2, ff_in, ff_out;
    Tensor adaln_weight, adaln_bias; // undefined for refiner blocks, or when AdaLN is not loaded
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
};

struct DitLoadOptions {
    Device device = Device::cpu();
    DitPrecision precision = DitPrecision::kBf16;
    // false: skip the 50 AdaLN projections (26 GB at full size) — the caller supplies precomputed tables.
    bool load_adaln = true;
    // Where the blocks' six projection matrices live (model/weights/residency.h). Anything but plain
    // resident native weights keeps host masters behind a LayerWeightSource; layerwise also keeps the AdaLN
    // projections on the host (uploaded block by block while the tables are computed, once per request).
    ResidencyOptions residency{};
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
// the config; converts dtypes for the precision (fp16: a value beyond ±65504 is refused, naming the tensor);
// copies to the device. Tensors for which `keep_on_host` is true stay on the host in the precision's dtype
// (a read-only view into the checkpoint's mapping when no conversion was needed).
Result<DitWeights> load_dit_weights(const DitCheckpoint& ckpt, const DitLoadOptions& options,
                                    const std::function<bool(const std::string&)>& keep_on_host = {});

// The names of the six projection matrices of block `b` that a LayerWeightSource streams, in the order of
// DitBlockWeights (to_q, to_k, to_v, to_out, ff_in, ff_out); the norms stay with the globals.
std::vector<std::string> dit_streamed_names(int b);

} // namespace h3::model
