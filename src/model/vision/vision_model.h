// The Qwen3-VL vision tower (spec §8.1) with DeepStack, as transformers' Qwen3VLVisionModel runs it:
//   patch rows [N, C·T·P·P] (pipeline/vision_processor order: per image and frame, merge windows in raster
//   order, the m×m patches of a window in raster order) → patch_embed (Conv3d with kernel = stride: a GEMM
//   with bias) → + the learned position table bilinearly interpolated to the patch grid (transformers 5.x
//   vision_utils, align_corners: src = i·(side−1)/(n−1) in fp32, floor, floor+1 clipped, four taps 00, 01,
//   10, 11 weighted and summed in fp32, the sum rounded once to the tower's dtype)
//   → `depth` blocks: x += proj(attn(LN1(x))), x += fc2(gelu_tanh(fc1(LN2(x)))); LayerNorm eps 1e-6; full
//   attention within each frame of each image; 2-D rotary on q/k over head_dim: inv_freq over head_dim/2
//   (θ 10⁴), angles [row·inv, col·inv] duplicated (rotate-half), applied in fp32
//   → merger: LN(hidden) → 4 window rows concatenated → fc1 → GELU (erf) → fc2 → [N/4, out_hidden].
// DeepStack: after block deepstack_visual_indexes[j] the hidden state goes through deepstack_merger_list[j]
// (the 4 window rows concatenated first, then LN over 4·hidden: "postshuffle norm") → [N/4, out_hidden].
// PyTorch reference: tools/reference/h3_vision.py.
#pragma once

#include "core/tensor.h"
#include "model/dit/dit_model.h"
#include "model/text/text_model.h"
#include "model/vision/vision_config.h"
#include "ops/context.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace h3::model {

inline constexpr const char* kVisionPrefix = "model.visual.";

// One image (or video) in patches: t frames of h × w patches (h, w multiples of the merge size).
struct VisionGrid {
    int t = 1, h = 0, w = 0;
    int64_t patches() const { return int64_t(t) * h * w; }
};

struct VisionBlockWeights {
    Tensor norm1_w, norm1_b, norm2_w, norm2_b; // [hidden]
    Tensor q, k, v, q_b, k_b, v_b;             // qkv split: [hidden, hidden], [hidden]
    Tensor proj, proj_b;                       // [hidden, hidden], [hidden]
    Tensor fc1, fc1_b, fc2, fc2_b;             // [F, hidden], [F], [hidden, F], [hidden]
};

struct VisionMergerWeights {
    bool postshuffle = false; // LN over the 4 concatenated rows (DeepStack) instead of per row
    Tensor norm_w, norm_b;    // [hidden] or [4·hidden]
    Tensor fc1, fc1_b;        // [4·hidden, 4·hidden], [4·hidden]
    Tensor fc2, fc2_b;        // [out, 4·hidden], [out]
};

struct VisionWeights {
    Tensor patch, patch_b; // [hidden, C·T·P·P], [hidden]
    Tensor pos_embed;      // [num_position_embeddings, hidden], host
    std::vector<VisionBlockWeights> blocks;
    VisionMergerWeights merger;
    std::vector<VisionMergerWeights> deepstack;
};

// (name, shape) of every tensor of the vision tower (official names, patch_embed as the 5-D Conv3d weight).
std::vector<std::pair<std::string, std::vector<int64_t>>> vision_tensor_specs(const VisionConfig& c);

struct VisionOutput {
    Tensor embeds;                 // [N/4, out_hidden], act dtype, on the model's device
    std::vector<Tensor> deepstack; // one [N/4, out_hidden] per deepstack index
};

struct VisionLoadOptions {
    Device device = Device::cpu();
    TextPrecision precision = TextPrecision::kBf16;
};

class VisionModel {
public:
    // The vision tower of a text_encoder checkpoint (its config.json must have a vision_config).
    static Result<std::unique_ptr<VisionModel>> load(const TextCheckpoint& ckpt,
                                                     const VisionLoadOptions& options, ops::Context ctx);
    VisionModel(VisionConfig config, VisionWeights weights, TextPrecision precision, ops::Context ctx);

    const VisionConfig& config() const { return config_; }
    DType act_dtype() const { return precision_dtype(precision_); }

    // pixel_values [Σ grid patches, patch_dim] (any float dtype, host or the model's device) → merged
    // embeddings + DeepStack features. Hook names: "patch_embed", "pos_embed", "blocks.{i}.out". `cancel` is
    // read before every block and every image's attention (a 2048-edge reference image is tens of thousands
    // of patches: minutes on a CPU); once set, the forward stops with kCancelled.
    Result<VisionOutput> forward(const Tensor& pixel_values, const std::vector<VisionGrid>& grids,
                                 const IntermediateHook& hook = {},
                                 const std::atomic<bool>* cancel = nullptr) const;

    // Host tables (exposed for tests): the interpolated position embedding [N, hidden] f32 (the fp32 sum;
    // forward() rounds it to the act dtype once) and the rotary angles' cos/sin [N, head_dim] f32.
    Tensor position_embedding(const std::vector<VisionGrid>& grids) const;
    void rotary_tables(const std::vector<VisionGrid>& grids, Tensor& cos, Tensor& sin) const;

private:
    Status merge(const VisionMergerWeights& w, const Tensor& h, Tensor& out) const;

    VisionConfig config_;
    VisionWeights weights_;
    TextPrecision precision_;
    ops::Context ctx_;
};

} // namespace h3::model
