#include "core/strict_int.h"

namespace h3 {

namespace {

std::string shown(std::string_view text) {
    std::string s(text.substr(0, 40));
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return text.size() > 40 ? s + "..." : s;
}

// Digits only, no redundant leading zero; the magnitude into `out` (false on overflow of uint64).
bool magnitude(std::string_view d, uint64_t& out) {
    if (d.empty() || d.size() > 20) return false;
    if (d.size() > 1 && d[0] == '0') return false;
    uint64_t v = 0;
    for (char c : d) {
        if (c < '0' || c > '9') return false;
        const uint64_t digit = static_cast<uint64_t>(c - '0');
        if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
        v = v * 10 + digit;
    }
    out = v;
    return true;
}

} // namespace

Result<uint64_t> parse_uint64(std::string_view text, const std::string& what, uint64_t max) {
    uint64_t v = 0;
    if (!magnitude(text, v) || v > max)
        return invalid_argument(what + " must be a whole number in [0, " + std::to_string(max) + "], got '" +
                                shown(text) + "'");
    return v;
}

Result<int64_t> parse_int64(std::string_view text, const std::string& what, int64_t min, int64_t max) {
    const auto bad = [&] {
        return invalid_argument(what + " must be a whole number in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], got '" + shown(text) + "'");
    };
    const bool negative = !text.empty() && text[0] == '-';
    uint64_t m = 0;
    if (!magnitude(negative ? text.substr(1) : text, m)) return bad();
    if (negative && m == 0) return bad(); // "-0"
    const uint64_t limit = negative ? uint64_t(std::numeric_limits<int64_t>::max()) + 1
                                    : uint64_t(std::numeric_limits<int64_t>::max());
    if (m > limit) return bad();
    const int64_t v = negative ? static_cast<int64_t>(0 - m) : static_cast<int64_t>(m);
    if (v < min || v > max) return bad();
    return v;
}

} // namespace h3
