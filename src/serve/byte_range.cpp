#include "serve/byte_range.h"

#include <cctype>

namespace h3::serve {

namespace {

// Digits only, any number of them; a value past 2^64 − 1 saturates there (a position that large is past
// the end of any file, which makes the range unsatisfiable rather than ignored).
bool parse_u64(std::string_view s, uint64_t& out) {
    if (s.empty()) return false;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        const auto d = static_cast<uint64_t>(c - '0');
        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
    }
    out = v;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

} // namespace

ByteRange resolve_byte_range(std::string_view header, uint64_t size) {
    ByteRange whole{ByteRange::Kind::kWhole, 0, size};
    header = trim(header);
    if (header.empty()) return whole;
    const std::string_view unit = "bytes=";
    if (header.size() < unit.size()) return whole;
    for (size_t i = 0; i < unit.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(header[i])) != unit[i]) return whole;
    const std::string_view spec = trim(header.substr(unit.size()));
    if (spec.find(',') != std::string_view::npos) return whole; // several ranges: the whole file
    const size_t dash = spec.find('-');
    if (dash == std::string_view::npos) return whole;
    const std::string_view a = trim(spec.substr(0, dash)), b = trim(spec.substr(dash + 1));
    ByteRange unsatisfiable{ByteRange::Kind::kUnsatisfiable, 0, 0};
    uint64_t first = 0, last = 0;
    if (a.empty()) { // suffix: the last N bytes
        if (!parse_u64(b, last)) return whole;
        if (last == 0 || size == 0) return unsatisfiable;
        const uint64_t n = last < size ? last : size;
        return {ByteRange::Kind::kPartial, size - n, n};
    }
    if (!parse_u64(a, first)) return whole;
    if (b.empty()) {
        last = UINT64_MAX;
    } else if (!parse_u64(b, last) || last < first) {
        return whole; // not a valid range: ignored
    }
    if (first >= size) return unsatisfiable;
    if (last >= size) last = size - 1;
    return {ByteRange::Kind::kPartial, first, last - first + 1};
}

std::string content_range_value(const ByteRange& r, uint64_t size) {
    if (r.kind == ByteRange::Kind::kPartial)
        return "bytes " + std::to_string(r.offset) + "-" + std::to_string(r.offset + r.length - 1) + "/" +
               std::to_string(size);
    return "bytes */" + std::to_string(size);
}

} // namespace h3::serve
