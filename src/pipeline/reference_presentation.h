// The ref2va presentation (spec §8.2; diffusers build_ref2va_presentation): per reference, in request order,
// labels numbered per modality —
//   has_audio → "<Audio j>: "                                    (text)
//   image     → "<Picture i>: " (text) + <|vision_start|> + N_i × <|image_pad|> + <|vision_end|> (video tag)
//   video     → "<Video k>: " (text), then per merged frame pair b: "<{ts_b:.1f} seconds>" (text, Python's
//               round-half-even formatting: python_format_fixed) + <|vision_start|> + n_k × <|video_pad|> +
//               <|vision_end|> (video tag)
// then the prompt (text). Every label is tokenized on its own (one tokenizer call per segment, as diffusers
// does), never joined with its neighbours. An audio reference contributes its label only.
#pragma once

#include "model/tokenizer/tokenizer.h"
#include "pipeline/conditioner.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h3::pipeline {

struct VisionTokenIds {
    int32_t vision_start = -1, vision_end = -1, image_pad = -1, video_pad = -1;
};

// "<0.2 seconds>" for 0.25.
std::string timestamp_label(double seconds);

struct PresentationTokens {
    std::vector<int32_t> ids, tags;
};

// image_tokens: pad tokens of each image reference's block, in order; video_block_tokens: pad tokens of one
// block of each video reference, in order (its block count is its block_timestamps). prompt_ids: the
// tokenized prompt, appended last. Errors name the reference (counts that do not match the references).
Result<PresentationTokens> build_reference_presentation(const model::tokenizer::Tokenizer& tokenizer,
                                                        const std::vector<ConditionerReference>& references,
                                                        const std::vector<int64_t>& image_tokens,
                                                        const std::vector<int64_t>& video_block_tokens,
                                                        const std::vector<int32_t>& prompt_ids,
                                                        const VisionTokenIds& vision);

} // namespace h3::pipeline
