// The tiny checkpoint's conditioner: a `text_encoder/` with official tensor names and tiny shapes, and a
// `tokenizer/` the project generates itself (byte-level BPE in the official file formats), so the embedded
// default model needs no downloaded files.
#pragma once

#include "core/status.h"
#include "model/text/text_config.h"
#include "model/vision/vision_config.h"

#include <cstdint>
#include <string>

namespace h3::model {

struct TinyCheckpointParams;

// hidden 64 (= the tiny DiT's text_dim), 3 layers, 4 query / 2 kv heads × 16, SwiGLU 128, vocab 400.
TextConfig tiny_text_config();

// Writes `dir`/vocab.json, merges.txt and tokenizer_config.json: the 256 byte symbols, up to `merges` merges
// learned greedily (most frequent pair, ties by string order; pairs seen once are not merged) from a small
// built-in English corpus, and the official added tokens (<|endoftext|>, the vision tokens, <d> …
// <|caption_end|>) after them.
Status write_tiny_tokenizer(const std::string& dir, int merges = 120);

// The tiny vision tower: depth 3, hidden 16, 2 heads, MLP 32, patch 16, temporal 2, merge 2 (the official
// processor's sizes), out 64 (= the tiny text hidden), an 8×8 position table, DeepStack after blocks 0, 1, 2.
// Token ids: the official ones; write_tiny_text sets those of the tiny tokenizer.
VisionConfig tiny_vision_config();

// Writes `dir`/config.json (text_config + vision_config of `vision`) + two bf16 shards with an index
// (model-0000N-of-00002.safetensors), random from `seed` (deterministic). The language tensors come first
// from their own stream; the model.visual.* tensors from a second stream, so the language weights do not
// depend on the vision tower.
Status write_tiny_text_encoder(const std::string& dir, uint64_t seed,
                               const VisionConfig& vision = tiny_vision_config(),
                               const TextConfig& text = tiny_text_config());

// Adds text_encoder/ and tokenizer/ to a checkpoint that write_tiny_checkpoint wrote (diffusers: the root;
// original: FL2VA/), with their model_index.json entries; the hidden size (and the vision tower's output) is
// params.geometry.text_dim.
Status write_tiny_text(const TinyCheckpointParams& params);

} // namespace h3::model
