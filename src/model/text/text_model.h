// The H3 conditioner's language stack: Qwen3-VL text model, decoder layers 0..min(49, n-1), output the
// un-normalized hidden state after the last of them (hidden_states[50] for the official model), spec §8.1.
// Text-only input: positions 0..L-1, so the interleaved MRoPE is ordinary 1-D NeoX RoPE over head_dim.
// With vision input (TextVisionInputs): the vision embeddings replace the <|image_pad|>/<|video_pad|> rows,
// the DeepStack features are added to those rows after layers 0, 1, 2, … (transformers' _deepstack_process),
// and the rows get Qwen3-VL's 3-D MRoPE positions (mrope_positions): per frequency j < head_dim/2 the angle
// uses the h position when j % 3 == 1 and j < 3·mrope_section[1], the w position when j % 3 == 2 and
// j < 3·mrope_section[2], the t position otherwise (interleaved MRoPE).
// PyTorch reference: tools/reference/h3_text.py (its docstring states the bf16 rounding contract).
#pragma once

#include "core/tensor.h"
#include "io/checkpoint.h"
#include "model/dit/dit_model.h"
#include "model/text/text_config.h"
#include "model/weights/layer_source.h"
#include "ops/context.h"

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace h3::model {

// kFp32: all fp32; kBf16: bf16 weights and activations (fp32 math inside ops); kFp16: fp16 weights and
// activations with an fp32 residual stream (a weight beyond fp16's range is refused at load).
using TextPrecision = DitPrecision;

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
    // Where the layers' six projection matrices (q, k, v, o, up|gate, down) live; the norms and the
    // embedding table (on the host already) are unaffected.
    ResidencyOptions residency{};
};

// Vision input of one forward (fl2va keyframes, ref2va images and videos).
struct TextVisionInputs {
    std::vector<int64_t> rows;     // ascending row indices of the <|image_pad|> / <|video_pad|> tokens (V)
    Tensor embeds;                 // [V, hidden] merged vision embeddings (host or the model's device)
    std::vector<Tensor> deepstack; // each [V, hidden]: added to `rows` after layer j
    // (t, h, w) position of every row [L] each; empty: 0..L-1 on all three axes.
    std::array<std::vector<int64_t>, 3> positions;
};

// One vision input of a token sequence in merged tokens: an image (t = 1) or a video (t = its blocks).
struct MropeGrid {
    int t = 1, h = 0, w = 0;
};

// The token ids whose runs are vision blocks (transformers' mm_token_type_ids: image 1, video 2, text 0).
struct MropeTokens {
    int image_token_id = -1;
    int video_token_id = -1; // -1: no videos
};

// transformers' (5.x) Qwen3VLModel.get_rope_index for one unpadded sequence. Video grids are first split per
// frame (repeat_interleave over t, t := 1: every timestamped video block is its own run). The tokens are cut
// into runs of equal type; a text run of n tokens gets p … p+n−1 on all three axes (p from 0) and advances p
// by n; a vision run takes the next grid of its modality (images and videos in order) and gets
// (p + t_i, p + h_i, p + w_i) over its t×h×w tokens, then advances p by max(h, w). Errors: a run without a
// grid left, a run whose length is not its grid's t·h·w, grids left over.
Result<std::array<std::vector<int64_t>, 3>> mrope_positions(const std::vector<int32_t>& ids,
                                                            const MropeTokens& tokens,
                                                            const std::vector<MropeGrid>& image_grids,
                                                            const std::vector<MropeGrid>& video_grids);
// Images only (fl2va).
inline Result<std::array<std::vector<int64_t>, 3>>
mrope_positions(const std::vector<int32_t>& ids, int image_token_id, const std::vector<MropeGrid>& grids) {
    return mrope_positions(ids, MropeTokens{image_token_id, -1}, grids, {});
}

struct TextForwardOptions {
    IntermediateHook hook;                             // "embed", "layers.{i}.out"
    std::function<void(int done, int total)> progress; // after each layer
    const std::atomic<bool>* cancel = nullptr;         // checked between layers → kCancelled
};

class TextModel {
public:
    static Result<std::unique_ptr<TextModel>> load(const TextCheckpoint& ckpt, const TextLoadOptions& options,
                                                   ops::Context ctx);
    // With `stream`, the layers' six projection matrices come from that source (weights.layers hold the
    // norms only).
    TextModel(TextConfig config, TextWeights weights, TextPrecision precision, ops::Context ctx,
              std::unique_ptr<LayerWeightSource> stream = nullptr);

    const TextConfig& config() const { return config_; }
    int layers() const { return static_cast<int>(weights_.layers.size()); }
    DType act_dtype() const { return precision_dtype(precision_); }
    // The residual stream (and the output): the activation dtype, fp32 under kFp16.
    DType residual_dtype() const { return model::residual_dtype(precision_); }
    TextPrecision precision() const { return precision_; }
    const ops::Context& context() const { return ctx_; }
    const LayerWeightSource* layer_source() const { return stream_.get(); }
    LayerWeightSource* layer_source() { return stream_.get(); }
    std::string residency_describe() const;

    // ids (each in [0, vocab)) → [L, hidden] in residual_dtype() on the model's device.
    Result<Tensor> forward(const std::vector<int32_t>& ids, const TextForwardOptions& options = {}) const;
    // With vision input (nullptr: the text-only forward above). "layers.{i}.out" is recorded after the
    // DeepStack addition of that layer.
    Result<Tensor> forward(const std::vector<int32_t>& ids, const TextVisionInputs* vision,
                           const TextForwardOptions& options = {}) const;

    // Useful FLOPs of one forward over L tokens (GEMMs + attention, causal half counted).
    static double flops(const TextConfig& c, int layers, int64_t tokens);

private:
    TextConfig config_;
    TextWeights weights_;
    TextPrecision precision_;
    ops::Context ctx_;
    std::unique_ptr<LayerWeightSource> stream_; // mutable streaming state (one forward at a time)
};

// Random weights (bench): uniform, generated where they live with ops::fill_uniform. Norm weights ≈ 1.
// `host_matrices`: each layer's six projection matrices are made on the device and moved to host memory
// (page-locked when `pinned`) one layer at a time — the masters of a layerwise bench.
Result<TextWeights> random_text_weights(const TextConfig& c, int layers, TextPrecision precision,
                                        const ops::Context& ctx, uint64_t seed, bool host_matrices = false,
                                        bool pinned = true);

// The weight source of `weights.layers`' six projection matrices (q, k, v, o, up|gate, down) for `options`:
// moves them out of `weights` into host masters (int8-quantized when asked), then places them.
Result<std::unique_ptr<LayerWeightSource>> make_text_layer_source(TextWeights& weights,
                                                                  TextPrecision precision,
                                                                  const ResidencyOptions& options,
                                                                  const ops::Context& ctx);

} // namespace h3::model
