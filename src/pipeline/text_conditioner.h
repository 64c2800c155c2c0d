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

#include "model/text/text_model.h"
#include "model/tokenizer/tokenizer.h"
#include "model/vision/vision_model.h"
#include "pipeline/conditioner.h"
#include "pipeline/vision_processor.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace h3::pipeline {

// `path` is a tokenizer folder (vocab.json + merges.txt [+ tokenizer_config.json]) or a checkpoint root whose
// tokenizer component (or `tokenizer/` folder) holds them. Returns the folder.
Result<std::string> find_tokenizer_dir(const std::string& path);

// True when `checkpoint_dir` has a text_encoder component with weights and a tokenizer.
bool has_text_conditioner(const std::string& checkpoint_dir);

class TextConditioner final : public Conditioner {
public:
    static Result<std::unique_ptr<TextConditioner>> open(const PromptConditionerParams& params);

    std::string name() const override;
    int text_dim() const override { return model_->config().hidden_size; }
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
    const model::VisionModel* vision() const { return vision_.get(); }

    // The steps of encode(), for `h3-engine encode`.
    Result<std::vector<int32_t>> tokenize(const std::string& prompt) const;
    Result<Tensor> embed(const std::vector<int32_t>& ids, const ConditionerOptions& options = {}) const;

    const model::tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
    const model::TextModel& model() const { return *model_; }

private:
    TextConditioner(model::tokenizer::Tokenizer tok, std::unique_ptr<model::TextModel> model, std::string dir)
        : tokenizer_(std::move(tok)), model_(std::move(model)), dir_(std::move(dir)) {}
    Status present_references(const ConditionerRequest& request, Presentation& p) const;
    model::tokenizer::Tokenizer tokenizer_;
    std::unique_ptr<model::TextModel> model_;
    std::unique_ptr<model::VisionModel> vision_; // null: the checkpoint has no vision tower
    VisionProcessorConfig processor_;
    VisionProcessorConfig video_processor_ = video_processor_defaults();
    std::string dir_;
};

} // namespace h3::pipeline
