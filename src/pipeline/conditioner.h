// The conditioner: prompt (+ later keyframe images) → the packed sequence's conditioning segment
// `[L, text_dim]` with one modality tag per row (spec §3 step 3, §5.2, §8). Two sources implement it: a
// precomputed embeddings file (`generate --prompt-embeds`, lets users reuse encodings) and the checkpoint's
// text encoder (pipeline/text_conditioner: Qwen3-VL + tokenizer).
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "model/weights/residency.h"
#include "ops/context.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace h3::pipeline {

// Row tags inside the conditioning segment (spec §5.2): prompt/label rows are text (1); vision-token rows
// that fl2va/ref2va place inside the conditioner are video (0).
inline constexpr int32_t kTagVideo = 0;
inline constexpr int32_t kTagText = 1;
inline constexpr int32_t kTagAudio = 2;

struct ConditionerProgress {
    std::string stage; // "tokenize", "encode", "layer", ...
    int done = 0;
    int total = 0;
};

struct ConditionerOptions {
    std::function<void(const ConditionerProgress&)> progress; // optional
    const std::atomic<bool>* cancel = nullptr;                // checked between layers; → kCancelled
};

// One keyframe image for fl2va presentation ("<Picture i>: " + vision tokens). RGB8, row-major HWC.
struct ConditionerImage {
    int width = 0, height = 0;
    std::vector<uint8_t> rgb;
};

// One ref2va reference as the conditioner presents it (spec §8.2), in request order. Labels are numbered per
// modality: "<Audio j>: " first when the reference carries audio (an audio reference, or a video with a
// soundtrack), then "<Picture i>: " + an image block for an image, or "<Video k>: " + per block
// "<{ts:.1f} seconds>" + a <|video_pad|> block for a video. An audio reference contributes its label only.
enum class ReferenceKind { kImage, kVideo, kAudio };
const char* reference_kind_name(ReferenceKind kind); // "image", "video", "audio"
struct ConditionerReference {
    ReferenceKind kind = ReferenceKind::kImage;
    bool has_audio = false;               // kAudio: always; kVideo: the clip has a soundtrack
    ConditionerImage image;               // kImage: the prepared image (2048-px short edge)
    std::vector<ConditionerImage> frames; // kVideo: the frames sampled at 2 fps (before pair padding)
    std::vector<double> block_timestamps; // kVideo: one per merged frame pair, seconds
};

struct ConditionerRequest {
    std::string prompt;                           // used verbatim (no chat template, no special tokens)
    std::vector<ConditionerImage> images;         // fl2va keyframes in anchor order; empty for t2va
    std::vector<ConditionerReference> references; // ref2va, in request order (images must then be empty)
};

struct Conditioning {
    Tensor embeddings;         // [L, text_dim] host, bf16 or f32 (the DiT converts)
    std::vector<int32_t> tags; // [L] kTagText or kTagVideo per row
    int64_t rows() const { return embeddings.defined() ? embeddings.dim(0) : 0; }
};

class Conditioner {
public:
    virtual ~Conditioner() = default;
    virtual std::string name() const = 0; // for messages: "prompt-embeds FILE", "qwen3-vl text encoder"
    virtual int text_dim() const = 0;
    // Errors name the field (prompt, image i) or the file; cancellation returns kCancelled.
    virtual Result<Conditioning> encode(const ConditionerRequest& request,
                                        const ConditionerOptions& options = {}) = 0;
};

// Reads a precomputed conditioner output: a safetensors file with one tensor named `prompt_embeds` (or,
// failing that, the file's only tensor) of shape [L, text_dim] or [1, L, text_dim], any float dtype, and an
// optional i32/i64 `prompt_tags` [L] (default: all text). The prompt text is ignored; images are rejected.
Result<std::unique_ptr<Conditioner>> make_embeds_conditioner(const std::string& path, int expected_text_dim);

// Writes `c` in the format make_embeds_conditioner reads.
Status save_conditioning(const std::string& path, const Conditioning& c);

// The checkpoint's text encoder + tokenizer loaded standalone (TextConditioner::open: h3-engine encode,
// tests); pipeline::Generator builds its conditioner over the ModelStore's leases instead.
struct PromptConditionerParams {
    std::string checkpoint_dir; // checkpoint root (either layout)
    ops::Context ctx;           // where the encoder runs
    bool fp32 = false;          // fp32 reference mode instead of bf16
    bool fp16 = false; // fp16 language stack with an fp32 residual stream (the vision tower runs fp32)
    model::ResidencyOptions residency{}; // where the 50 text layers' projection matrices live
};

} // namespace h3::pipeline
