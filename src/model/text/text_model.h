// The H3 conditioner's language stack: Qwen3-VL text model, decoder layers 0..min(49, n-1), output the
// un-normalized hidden state after the last of them (hidden_states[50] for the official model), spec §8.1.
// Text-only input: positions 0..L-1, so the interleaved MRoPE is ordinary 1-D NeoX RoPE over head_dim.
// PyTorch reference: tools/reference/h3_text.py (its docstring states the bf16 rounding contract).
#pragma once

#include "core/tensor.h"
#include "io/checkpoint.h"
#include "model/dit/dit_model.h"
#include "model/text/text_config.h"
#include "ops/context.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace h3::model {

using TextPrecision =
    DitPrecision; // kFp32: all fp32; kBf16: bf16 weights and activations (fp32 math inside ops)

// Official tensor names (the checkpoint's `model.language_model.` prefix).
inline constexpr const char* kTextPrefix = "model.language_model.";

struct TextLayerWeights {
    Tensor input_norm, post_norm; // [hidden]
    Tensor q, k, v, o;            // [Hq·D, hidden], [Hkv·D, hidden] ×2, [hidden, Hq·D]
    Tensor q_norm, k_norm;        // [D]
    Tensor up_gate;               // [2F, hidden] = [up; gate] (the swiglu op's [value | gate] order)
    Tensor down;                  // [hidden, F]
};

struct TextWeights {
    Tensor embed; // [vocab, hidden], kept on the host (rows are gathered there)
    std::vector<TextLayerWeights> layers;
};

struct TextCheckpoint {
    TextConfig config;
    io::TensorSet tensors;
    std::string dir;
};

// `path`: a checkpoint root (its text_encoder component) or a text_encoder folder (config.json +
// safetensors).
Result<TextCheckpoint> open_text_checkpoint(const std::string& path);

// (name, shape) of every tensor the conditioner reads for `c` (embeddings + the used layers).
std::vector<std::pair<std::string, std::vector<int64_t>>> text_tensor_specs(const TextConfig& c, int layers);

struct TextLoadOptions {
    Device device = Device::cpu();
    TextPrecision precision = TextPrecision::kBf16;
    int layers = -1; // -1: config.used_layers()
};

struct TextForwardOptions {
    IntermediateHook hook;                             // "embed", "layers.{i}.out"
    std::function<void(int done, int total)> progress; // after each layer
    const std::atomic<bool>* cancel = nullptr;         // checked between layers → kCancelled
};

class TextModel {
public:
    static Result<std::unique_ptr<TextModel>> load(const TextCheckpoint& ckpt, const TextLoadOptions& options,
                                                   ops::Context ctx);
    TextModel(TextConfig config, TextWeights weights, TextPrecision precision, ops::Context ctx);

    const TextConfig& config() const { return config_; }
    int layers() const { return static_cast<int>(weights_.layers.size()); }
    DType act_dtype() const { return precision_ == TextPrecision::kFp32 ? DType::kF32 : DType::kBF16; }
    const ops::Context& context() const { return ctx_; }

    // ids (each in [0, vocab)) → [L, hidden] in act_dtype() on the model's device.
    Result<Tensor> forward(const std::vector<int32_t>& ids, const TextForwardOptions& options = {}) const;

    // Useful FLOPs of one forward over L tokens (GEMMs + attention, causal half counted).
    static double flops(const TextConfig& c, int layers, int64_t tokens);

private:
    TextConfig config_;
    TextWeights weights_;
    TextPrecision precision_;
    ops::Context ctx_;
};

// Random weights (bench): uniform, generated where they live with ops::fill_uniform. Norm weights ≈ 1.
Result<TextWeights> random_text_weights(const TextConfig& c, int layers, TextPrecision precision,
                                        const ops::Context& ctx, uint64_t seed);

} // namespace h3::model
