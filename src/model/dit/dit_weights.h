// DiT weights in diffusers form, loaded from either checkpoint format onto one device.
#pragma once

#include "core/tensor.h"
#include "io/checkpoint.h"
#include "model/dit/dit_config.h"
#include "model/dit/dit_tensors.h"
#include "model/weights/residency.h"
#include "ops/gemm_fp8.h"

#include <functional>

#include <string>
#include <vector>

namespace h3::model {

// Compute precision of a forward. kFp32: every weight and activation in fp32 (the CPU reference mode).
// kBf16: the reference's contract — bf16 block weights and residual stream; fp32 patch projections, time MLP
// and output heads. kFp8 (opt-in, lossy): kBf16 with the transformer blocks' six GEMMs in e4m3 (per-row
// activation and per-channel weight scales, ops/gemm_fp8.h) and their attention in e4m3 (ops/attention.h's
// fp8 mode, head dim 128), except the layers DitFp8Options keeps in bf16; the refiner stays bf16.
// kFp16 (GPUs without bf16, sm_70/sm_75): fp16 weights and activations with an fp32 residual stream and
// the same fp32 islands and outputs; a weight that overflows fp16 is refused at load.
enum class DitPrecision { kFp32, kBf16, kFp8, kFp16 };
const char* precision_name(DitPrecision p); // "fp32" | "bf16" | "fp8" | "fp16"
// "fp32" | "bf16" | "fp8" | "fp16"; errors name `field`.
Result<DitPrecision> parse_precision(const std::string& text, const std::string& field = "dtype");
// Weights and activations of `p` (f32 / bf16 / f16; kFp8 keeps bf16 copies), and its residual stream (f32
// for kFp16).
DType precision_dtype(DitPrecision p);
DType residual_dtype(DitPrecision p);

// A block's e4m3 GEMM weights under kFp8 (an undefined one keeps that GEMM in bf16) and whether its attention
// runs in e4m3. gate_compress: FastH3's VSA compression gate (defined only where the block has one).
struct DitFp8Block {
    ops::Fp8Weight to_q, to_k, to_v, to_out, ff_in, ff_out, gate_compress;
    bool attention = false;
    ops::Fp8GemmParams gemm = {}; // how the e4m3 GEMMs accumulate (DitFp8Options::fast_accum)
    bool fused_inputs = true;     // DitFp8Options::fused_quantization
};

struct DitBlockWeights {
    Tensor norm1, to_q, to_k, to_v, norm_q, norm_k, to_out, norm2, ff_in, ff_out;
    Tensor adaln_weight, adaln_bias; // undefined for refiner blocks, or when AdaLN is not loaded
    Tensor gate_compress; // FastH3's VSA compression gate [inner, hidden]; undefined: the branch is off
    DitFp8Block fp8 = {}; // filled by quantize_dit_fp8 (model/dit/dit_fp8.h)
    // The block has a compression gate, in bf16 or (kFp8, its bf16 copy released) in e4m3 only.
    bool has_gate() const { return gate_compress.defined() || fp8.gate_compress.defined(); }
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
    bool has_gate_compress() const { return !blocks.empty() && blocks.front().has_gate(); }
};

// Which layers of a kFp8 model stay in bf16: entries "blocks.N.LAYER" with N a block index (negative counts
// from the end: -1 is the last block) and LAYER one of to_q, to_k, to_v, to_out, ff_in, ff_out,
// to_gate_compress (FastH3's VSA compression gate), attention or * (the whole block). The default keeps the
// last block's attention output and FFN output projections in bf16, the layers nearest the output heads (see
// docs/kernels/attention_notes.md for what was measured).
struct DitFp8Options {
    std::vector<std::string> bf16_layers = {"blocks.-1.to_out", "blocks.-1.ff_out"};
    // cuBLASLt's fast fp8 accumulation for the block GEMMs (ops::Fp8GemmParams::fast_accum): no periodic
    // promotion of the tensor cores' partial sums to fp32. The default: on one H100 the block GEMMs ran at
    // 1,341 TFLOP/s instead of 1,110 and the full-width velocity moved by cos 1e-6 (docs/kernels/
    // attention_notes.md); false is the exact accumulation (`bench dit --fp8-accum exact`).
    bool fast_accum = true;
    // The norms and the SwiGLU write the e4m3 rows (and row scales) the next GEMMs take, instead of bf16 rows
    // each GEMM rounds again: the same bytes, one pass fewer per GEMM input (ops/fp8_fused.h). A block runs
    // the unfused path where something needs its bf16 rows (run-time adapters, hooks, a bf16 exception among
    // the GEMMs reading them — VSA's compression gate among them). false: always unfused (`bench dit
    // --fp8-fused off`).
    bool fused_quantization = true;
    bool keep_bf16 = false; // keep the bf16 copies of quantized weights (benches comparing both precisions)
};

struct DitLoadOptions {
    Device device = Device::cpu();
    DitPrecision precision = DitPrecision::kBf16;
    // false: skip the 50 AdaLN projections (26 GB at full size) — the caller supplies precomputed tables.
    bool load_adaln = true;
    DitFp8Options fp8 = {}; // used when precision is kFp8
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
