// Strict integer parsing for text that comes from a user (CLI values, query parameters, form fields): the
// whole text must be a base-10 integer — optional '-' for signed types only, no sign for unsigned ones, no
// blanks, no '+', no leading zeros beyond "0", no exponent — and must lie in [min, max]. Nothing wraps and
// nothing saturates: "-1" for an unsigned field and "18446744073709551616" are errors that name the field.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace h3 {

// `what` names the value in the message ("--seed", "limit", "seed"). Errors are invalid_argument.
Result<uint64_t> parse_uint64(std::string_view text, const std::string& what,
                              uint64_t max = std::numeric_limits<uint64_t>::max());
Result<int64_t> parse_int64(std::string_view text, const std::string& what,
                            int64_t min = std::numeric_limits<int64_t>::min(),
                            int64_t max = std::numeric_limits<int64_t>::max());

// The message (empty when valid) for a CLI validator: the same rules as above for an integer of type T.
template <typename T> std::string strict_integer_error(const std::string& text, const std::string& what) {
    if constexpr (std::is_unsigned_v<T>) {
        auto r = parse_uint64(text, what, std::numeric_limits<T>::max());
        return r.ok() ? std::string() : r.status().message();
    } else {
        auto r = parse_int64(text, what, std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
        return r.ok() ? std::string() : r.status().message();
    }
}

} // namespace h3
