#include "core/python_format.h"

#include "core/check.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace h3 {

namespace {

// A non-negative integer in base 10⁹, least significant limb first.
class Decimal {
public:
    explicit Decimal(uint64_t v) {
        do {
            limbs_.push_back(static_cast<uint32_t>(v % kBase));
            v /= kBase;
        } while (v);
    }
    void mul(uint32_t f) { // f < 2³²: limb·f + carry < 10⁹·2³² + 2³² < 2⁶⁴
        uint64_t carry = 0;
        for (uint32_t& l : limbs_) {
            const uint64_t x = static_cast<uint64_t>(l) * f + carry;
            l = static_cast<uint32_t>(x % kBase);
            carry = x / kBase;
        }
        while (carry) {
            limbs_.push_back(static_cast<uint32_t>(carry % kBase));
            carry /= kBase;
        }
    }
    void mul_pow(uint32_t base, uint32_t chunk_power, uint32_t chunk, int n) { // · base^n
        for (; n >= static_cast<int>(chunk_power); n -= static_cast<int>(chunk_power)) mul(chunk);
        uint32_t rest = 1;
        for (int i = 0; i < n; ++i) rest *= base;
        mul(rest);
    }
    std::string digits() const {
        std::string s = std::to_string(limbs_.back());
        for (size_t i = limbs_.size() - 1; i-- > 0;) {
            const std::string l = std::to_string(limbs_[i]);
            s.append(9 - l.size(), '0');
            s += l;
        }
        return s;
    }

private:
    static constexpr uint64_t kBase = 1000000000;
    std::vector<uint32_t> limbs_;
};

// Adds one unit in the last place of a decimal digit string.
void increment(std::string& s) {
    for (size_t i = s.size(); i-- > 0;) {
        if (s[i] != '9') {
            ++s[i];
            return;
        }
        s[i] = '0';
    }
    s.insert(s.begin(), '1');
}

} // namespace

std::string python_format_fixed(double value, int digits) {
    H3_CHECK(digits >= 0 && digits <= 100, "digits out of range");
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
    const bool negative = std::signbit(value);
    // |value| = m · 2^e exactly, m < 2⁵³.
    int e = 0;
    const double frac = std::frexp(std::fabs(value), &e);
    const uint64_t m = static_cast<uint64_t>(std::ldexp(frac, 53));
    e -= 53;
    Decimal n(m);
    int k = 0; // |value| = n / 10^k
    if (e >= 0) {
        n.mul_pow(2, 30, 1u << 30, e);
    } else {
        k = -e;
        n.mul_pow(5, 13, 1220703125u, k); // m / 2^k = m · 5^k / 10^k
    }
    std::string s = n.digits();
    if (static_cast<int>(s.size()) < k + 1) s.insert(0, static_cast<size_t>(k + 1) - s.size(), '0');
    if (k > digits) {
        // Round half to even at `digits` fraction digits, on the exact expansion.
        const size_t cut = s.size() - static_cast<size_t>(k - digits);
        const char first = s[cut];
        bool rest = false;
        for (size_t i = cut + 1; i < s.size() && !rest; ++i) rest = s[i] != '0';
        const bool odd = (s[cut - 1] - '0') % 2 == 1;
        s.erase(cut);
        if (first > '5' || (first == '5' && (rest || odd))) increment(s);
        k = digits;
    }
    s.append(static_cast<size_t>(digits - k), '0');
    size_t int_len = s.size() - static_cast<size_t>(digits);
    size_t lead = 0;
    while (lead + 1 < int_len && s[lead] == '0') ++lead;
    std::string out;
    if (negative) out.push_back('-');
    out.append(s, lead, int_len - lead);
    if (digits > 0) {
        out.push_back('.');
        out.append(s, int_len, std::string::npos);
    }
    return out;
}

} // namespace h3
