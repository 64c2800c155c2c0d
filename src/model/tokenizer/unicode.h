// UTF-8 helpers and NFC normalization for the tokenizer (the Qwen2 tokenizer normalizes to NFC first).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace h3::model::tokenizer {

// Decodes `s` into code points. Returns false (and the byte offset of the first bad sequence) when `s` is
// not well-formed UTF-8 (overlong forms, surrogates and values above U+10FFFF are rejected).
bool utf8_decode(std::string_view s, std::vector<char32_t>& out, size_t* bad_offset = nullptr);
void utf8_append(std::string& out, char32_t cp);

// Canonical combining class (0 for starters).
int combining_class(char32_t cp);

// NFC of well-formed UTF-8 text (canonical decomposition, canonical ordering, canonical composition).
std::string nfc(std::string_view utf8);

} // namespace h3::model::tokenizer
