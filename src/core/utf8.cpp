#include "core/utf8.h"

namespace h3 {

namespace {

// Length of the well-formed sequence at text[i], 0 when ill-formed.
size_t sequence_length(std::string_view t, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(t[k]); };
    const unsigned char c = b(i);
    if (c < 0x80) return 1;
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF; // bounds of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0; // no overlongs
        if (c == 0xED) hi = 0x9F; // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F; // nothing past U+10FFFF
    } else {
        return 0;
    }
    if (i + n > t.size()) return 0;
    if (b(i + 1) < lo || b(i + 1) > hi) return 0;
    for (size_t k = 2; k < n; ++k)
        if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
    return n;
}

} // namespace

bool is_valid_utf8(std::string_view t) {
    for (size_t i = 0; i < t.size();) {
        const size_t n = sequence_length(t, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string sanitized_utf8(std::string_view t) {
    std::string out;
    out.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
        const size_t n = sequence_length(t, i);
        const auto c = static_cast<unsigned char>(t[i]);
        if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7f))) {
            out += '?';
            ++i;
            continue;
        }
        out.append(t.substr(i, n));
        i += n;
    }
    return out;
}

} // namespace h3
