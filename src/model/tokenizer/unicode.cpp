#include "model/tokenizer/unicode.h"

#include <algorithm>
#include <unordered_map>

namespace h3::model::tokenizer {
namespace {

#include "model/tokenizer/unicode_nfc_data.inc"

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
              kSCount = kLCount * kNCount;

const uint32_t* find_decomposition(char32_t cp) {
    const auto* begin = std::begin(kDecomposition);
    const auto* end = std::end(kDecomposition);
    const auto* it =
        std::lower_bound(begin, end, cp, [](const uint32_t(&e)[3], char32_t c) { return e[0] < c; });
    return (it != end && (*it)[0] == cp) ? *it : nullptr;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
    if (cp >= kSBase && cp < kSBase + kSCount) {
        const int s = static_cast<int>(cp - kSBase);
        out.push_back(kLBase + s / kNCount);
        out.push_back(kVBase + (s % kNCount) / kTCount);
        if (s % kTCount) out.push_back(kTBase + s % kTCount);
        return;
    }
    const uint32_t* d = find_decomposition(cp);
    if (!d) {
        out.push_back(cp);
        return;
    }
    decompose(d[1], out);
    if (d[2]) decompose(d[2], out);
}

// (first << 32 | second) → primary composite.
const std::unordered_map<uint64_t, char32_t>& composition_map() {
    static const std::unordered_map<uint64_t, char32_t> map = [] {
        std::unordered_map<uint64_t, char32_t> m;
        for (const auto& e : kDecomposition) {
            if (!e[2]) continue;
            if (std::binary_search(std::begin(kComposeExcluded), std::end(kComposeExcluded), e[0])) continue;
            m.emplace((uint64_t(e[1]) << 32) | e[2], e[0]);
        }
        return m;
    }();
    return map;
}

char32_t compose_pair(char32_t a, char32_t b) {
    if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
        return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
        b < kTBase + kTCount)
        return a + (b - kTBase);
    const auto& m = composition_map();
    auto it = m.find((uint64_t(a) << 32) | b);
    return it == m.end() ? 0 : it->second;
}

} // namespace

bool utf8_decode(std::string_view s, std::vector<char32_t>& out, size_t* bad_offset) {
    out.clear();
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        int n = 0;
        char32_t cp = 0, min = 0;
        if (c < 0x80) {
            cp = c;
        } else if ((c & 0xE0) == 0xC0) {
            n = 1, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            if (bad_offset) *bad_offset = i;
            return false;
        }
        if (n && i + n >= s.size()) {
            if (bad_offset) *bad_offset = i;
            return false;
        }
        for (int k = 1; k <= n; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0) != 0x80) {
                if (bad_offset) *bad_offset = i;
                return false;
            }
            cp = (cp << 6) | (cc & 0x3F);
        }
        if ((n && cp < min) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            if (bad_offset) *bad_offset = i;
            return false;
        }
        out.push_back(cp);
        i += n + 1;
    }
    return true;
}

void utf8_append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

int combining_class(char32_t cp) {
    const auto* begin = std::begin(kCombiningClass);
    const auto* end = std::end(kCombiningClass);
    const auto* it =
        std::upper_bound(begin, end, cp, [](char32_t c, const uint32_t(&e)[3]) { return c < e[0]; });
    if (it == begin) return 0;
    --it;
    return cp <= (*it)[1] ? static_cast<int>((*it)[2]) : 0;
}

std::string nfc(std::string_view utf8) {
    if (std::all_of(utf8.begin(), utf8.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
        return std::string(utf8);
    std::vector<char32_t> cps;
    if (!utf8_decode(utf8, cps)) return std::string(utf8);
    std::vector<char32_t> d;
    d.reserve(cps.size() + 8);
    for (char32_t cp : cps) decompose(cp, d);
    // Canonical ordering: stable sort of each run of non-starters by combining class.
    for (size_t i = 0; i < d.size();) {
        if (combining_class(d[i]) == 0) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < d.size() && combining_class(d[j]) != 0) ++j;
        std::stable_sort(d.begin() + i, d.begin() + j,
                         [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
        i = j;
    }
    // Canonical composition.
    std::vector<char32_t> out;
    out.reserve(d.size());
    long starter = -1; // index in out of the last starter
    int last_ccc = -1; // ccc of the last char appended after the starter (-1: none)
    for (char32_t cp : d) {
        const int ccc = combining_class(cp);
        if (starter >= 0) {
            const bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= ccc);
            if (!blocked) {
                if (char32_t c = compose_pair(out[starter], cp)) {
                    out[starter] = c;
                    continue;
                }
            }
        }
        if (ccc == 0) {
            starter = static_cast<long>(out.size());
            last_ccc = -1;
        } else {
            last_ccc = ccc;
        }
        out.push_back(cp);
    }
    std::string s;
    s.reserve(utf8.size());
    for (char32_t cp : out) utf8_append(s, cp);
    return s;
}

} // namespace h3::model::tokenizer
