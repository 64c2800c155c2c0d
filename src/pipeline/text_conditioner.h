// The checkpoint's own conditioner (spec §8): Qwen2 tokenizer + Qwen3-VL language stack, layers 0..49,
// prompt → [L, text_dim] bf16 (f32 in fp32 mode), all rows tagged text. With keyframe images (fl2va, spec
// §8.2) and a text encoder that has a vision tower (config.json vision_config + model.visual.* weights), per
// image i (1-based): "<Picture i>: " (text) + <|vision_start|> + N × <|image_pad|> + <|vision_end|> (video),
// then the prompt (text); images go through the Qwen2-VL processor (pipeline/vision_processor; the
// checkpoint's processor/preprocessor_config.json when present) and model/vision, the LM runs with DeepStack
// and MRoPE positions (model/text).
// With ref2va references (request.references, never together with images): the presentation of
// pipeline/reference_presentation; image references through the image processor, videos through the video
// processor (processor/video_preprocessor_config.json when present); the tower runs once over the images and
// once over the videos (as transformers' Qwen3VLModel does), image features fill the <|image_pad|> rows and
// video features the <|video_pad|> rows in order, DeepStack features joined by position, MRoPE positions with
// every timestamped video block its own (1, h, w) run.
#pragma once

#include "model/text/text_stack.h"
#include "pipeline/conditioner.h"
#include "pipeline/vision_processor.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace h3::pipeline {

// The image and video processors' configs: the checkpoint's processor/ files when present, else the official
// values (Qwen2-VL image processor; the Qwen3-VL video processor).
struct ProcessorConfigs {
    VisionProcessorConfig image;
    VisionProcessorConfig video = video_processor_defaults();
};
Result<ProcessorConfigs> load_processor_configs(const std::string& checkpoint_dir);

class TextConditioner final : public Conditioner {
public:
    // Over loaded models (a ModelStore's leases, which the caller keeps for this object's lifetime). `vision`
    // may be null (then images and visual references are refused); the processors must fit the tower.
    static Result<std::unique_ptr<TextConditioner>>
    over(const model::TextStack& text, const model::VisionModel* vision, const ProcessorConfigs& processors);
    // Standalone (h3-engine encode, tests): loads the checkpoint's text stack and, when it has one, its
    // vision tower itself.
    static Result<std::unique_ptr<TextConditioner>> open(const PromptConditionerParams& params);

    std::string name() const override;
    int text_dim() const override { return text_->model->config().hidden_size; }
    Result<Conditioning> encode(const ConditionerRequest& request,
                                const ConditionerOptions& options = {}) override;

    // The token sequence of a request (spec §8.2) with one tag per token, and the processed images / videos.
    struct Presentation {
        std::vector<int32_t> ids, tags;
        Tensor pixel_values;                     // [Σ patches, patch_dim] f32 host; undefined without images
        std::vector<model::VisionGrid> grids;    // per image, in patches
        std::vector<model::MropeGrid> llm_grids; // per image, in merged tokens
        Tensor pixel_values_videos;              // [Σ video patches, patch_dim] f32 host, or undefined
        std::vector<model::VisionGrid> video_grids;    // per video, in patches (t = its blocks)
        std::vector<model::MropeGrid> video_llm_grids; // per video, in merged tokens (t = its blocks)
    };
    Result<Presentation> present(const ConditionerRequest& request) const;
    // MRoPE positions of a presentation (model::mrope_positions with the checkpoint's image / video ids).
    Result<std::array<std::vector<int64_t>, 3>> positions(const Presentation& p) const;
    bool has_vision() const { return vision_ != nullptr; }
    const model::VisionModel* vision() const { return vision_; }

    // The steps of encode(), for `h3-engine encode`.
    Result<std::vector<int32_t>> tokenize(const std::string& prompt) const;
    Result<Tensor> embed(const std::vector<int32_t>& ids, const ConditionerOptions& options = {}) const;

    const model::tokenizer::Tokenizer& tokenizer() const { return text_->tokenizer; }
    const model::TextModel& model() const { return *text_->model; }

private:
    TextConditioner(const model::TextStack& text, const model::VisionModel* vision,
                    ProcessorConfigs processors)
        : text_(&text), vision_(vision), processor_(processors.image), video_processor_(processors.video) {}
    Status present_references(const ConditionerRequest& request, Presentation& p) const;
    std::unique_ptr<model::TextStack> own_text_;     // open() only
    std::unique_ptr<model::VisionModel> own_vision_; // open() only
    const model::TextStack* text_ = nullptr;
    const model::VisionModel* vision_ = nullptr; // null: no vision tower
    VisionProcessorConfig processor_;
    VisionProcessorConfig video_processor_;
};

} // namespace h3::pipeline
