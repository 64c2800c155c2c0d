// Qwen2 byte-level BPE tokenizer (spec §8.2), read from the published files: vocab.json, merges.txt and
// tokenizer_config.json (added_tokens_decoder + additional_special_tokens).
//
// encode(text) = for each segment between added tokens (matched first, leftmost-longest, on the raw text):
// NFC → Qwen2 pre-tokenization regex (PCRE2, UTF + Unicode properties) → byte-level mapping → BPE by merge
// rank. No BOS, no chat template: the prompt is tokenized verbatim (add_special_tokens=False).
#pragma once

#include "core/status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace h3::model::tokenizer {

struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool special = true;
};

// The H3 prompt-writing tokens listed in additional_special_tokens but absent from added_tokens_decoder;
// transformers appends them after the highest id, in this order (151669… for the official files).
extern const char* const kH3ExtraTokens[7];

struct TokenizerFiles {
    std::string vocab;  // vocab.json
    std::string merges; // merges.txt
    std::string config; // tokenizer_config.json (optional: empty = no added tokens)
};

class Tokenizer {
public:
    // `dir` holds vocab.json, merges.txt and tokenizer_config.json.
    static Result<Tokenizer> load(const std::string& dir);
    static Result<Tokenizer> load(const TokenizerFiles& files);

    // Token ids of `text` (well-formed UTF-8, else kInvalidArgument naming the byte offset).
    Result<std::vector<int32_t>> encode(std::string_view text) const;
    // Text of `ids` (added tokens verbatim; invalid UTF-8 from partial byte tokens becomes U+FFFD).
    Result<std::string> decode(const std::vector<int32_t>& ids) const;

    // Id of a vocabulary or added token, -1 if unknown.
    int32_t token_to_id(std::string_view token) const;
    // Highest id + 1 (the length transformers reports).
    int32_t size() const;
    const std::vector<AddedToken>& added_tokens() const;
    // Number of BPE merges.
    size_t merge_count() const;

    struct Impl;

private:
    std::shared_ptr<const Impl> impl_;
};

// The Qwen2 split pattern as the tokenizer compiles it for PCRE2 (\s spelled out as Unicode White_Space).
std::string qwen2_split_pattern();

// The GPT-2 byte → printable code point map (bytes_to_unicode).
char32_t byte_to_unicode(uint8_t b);

} // namespace h3::model::tokenizer
