// UTF-8 checks for text from outside (request fields, file names, ids) before it reaches JSON, whose
// serializer throws on ill-formed sequences.
#pragma once

#include <string>
#include <string_view>

namespace h3 {

// Well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF).
bool is_valid_utf8(std::string_view text);
// The text with every ill-formed byte and every control character replaced by '?' (for labels and messages).
std::string sanitized_utf8(std::string_view text);

} // namespace h3
