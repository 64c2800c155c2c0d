// DiT weights in diffusers form, loaded from either checkpoint format onto one device.
#pragma once

#include "core/tensor.h"
#include "io/checkpoint.h"
#include "model/dit/dit_config.h"
#include "model/dit/dit_tensors.h"
#include "ops/gemm_fp8.h"

#include <string>
#include <vector>

namespace h3::model {

// Compute precision of a forward. kFp32: every weight and activation in fp32 (the CPU reference mode).
// kBf16: the reference's contract — bf16 block weights and residual stream; fp32 patch projections, time MLP
// and output heads. kFp8 (opt-in, lossy): kBf16 with the transformer blocks' six GEMMs in e4m3 (per-row
// activation and per-channel weight scales, ops/gemm_fp8.h) and their attention in e4m3 (ops/attention.h's
// fp8 mode, head dim 128), except the layers DitFp8Options keeps in bf16; the refiner stays bf16.
enum class DitPrecision { kFp32, kBf16, kFp8 };
const char* precision_name(DitPrecision p);

// A block's e4m3 GEMM weights under kFp8 (an undefined one keeps that GEMM in bf16) and whether its attention
// runs in e4m3.
struct DitFp8Block {
    ops::Fp8Weight to_q, to_k, to_v, to_out, ff_in, ff_out;
    bool attention = false;
};

struct DitBlockWeights {
    Tensor norm1, to_q, to_k, to_v, norm_q, norm_k, to_out, norm2, ff_in, ff_out;
    Tensor adaln_weight, adaln_bias; // undefined for refiner blocks, or when AdaLN is not loaded
    Tensor gate_compress; // FastH3's VSA compression gate [inner, hidden]; undefined: the branch is off
    DitFp8Block fp8 = {}; // filled by quantize_dit_fp8 (model/dit/dit_fp8.h)
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

// Which layers of a kFp8 model stay in bf16: entries "blocks.N.LAYER" with N a block index (negative counts
// from the end: -1 is the last block) and LAYER one of to_q, to_k, to_v, to_out, ff_in, ff_out, attention or
// * (the whole block). The default keeps the last block's attention output and FFN output projections in
// bf16, the layers nearest the output heads (see docs/kernels/attention_notes.md for what was measured).
struct DitFp8Options {
    std::vector<std::string> bf16_layers = {"blocks.-1.to_out", "blocks.-1.ff_out"};
    bool keep_bf16 = false; // keep the bf16 copies of quantized weights (benches comparing both precisions)
};

struct DitLoadOptions {
    Device device = Device::cpu();
    DitPrecision precision = DitPrecision::kBf16;
    // false: skip the 50 AdaLN projections (26 GB at full size) — the caller supplies precomputed tables.
    bool load_adaln = true;
    DitFp8Options fp8 = {}; // used when precision is kFp8
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
