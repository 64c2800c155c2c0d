// The conditioner's models as loaded components (runtime::ModelStore owns them; pipeline::TextConditioner
// runs them): the text stack (Qwen2 byte-level BPE tokenizer + the Qwen3-VL language layers 0..49) and the
// Qwen3-VL vision tower, both read from a checkpoint's text_encoder/ (+ tokenizer/) component.
#pragma once

#include "core/status.h"
#include "model/text/text_model.h"
#include "model/tokenizer/tokenizer.h"
#include "model/vision/vision_model.h"

#include <memory>
#include <string>

namespace h3::model {

struct TextStack {
    tokenizer::Tokenizer tokenizer;
    std::unique_ptr<TextModel> model;
    std::string dir; // the text_encoder folder (for messages)
};

// `path` is a tokenizer folder (vocab.json + merges.txt [+ tokenizer_config.json]) or a checkpoint root whose
// tokenizer component (or `tokenizer/` folder) holds them. Returns the folder.
Result<std::string> find_tokenizer_dir(const std::string& path);

// True when `checkpoint` has a text_encoder component with weights and a tokenizer.
bool has_text_stack(const std::string& checkpoint);
// True when the text encoder of `ckpt` carries a vision tower (config.json vision_config + model.visual.*).
bool has_vision_tower(const TextCheckpoint& ckpt);

// The tokenizer and the language stack of `checkpoint` (a root or a text_encoder folder); the tokenizer must
// fit the vocabulary.
Result<std::unique_ptr<TextStack>> load_text_stack(const std::string& checkpoint,
                                                   const TextLoadOptions& options, const ops::Context& ctx);
// The vision tower of `checkpoint`'s text encoder; not_found when it has none.
Result<std::unique_ptr<VisionModel>>
load_vision_tower(const std::string& checkpoint, const VisionLoadOptions& options, const ops::Context& ctx);

} // namespace h3::model
