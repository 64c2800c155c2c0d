// JSON from files and from the network, parsed with bounded nesting, and strict integer reads: errors name
// the file (or request part) and the field. Every JSON parse of outside data goes through parse_json, so a
// deeply nested document is refused before anything recurses over it (printing, copying, comparing).
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace h3::io {

// Configs, model indexes, request bodies and job records nest a handful of levels; tokenizer.json a few more.
inline constexpr int kMaxJsonDepth = 64;

// Deepest bracket nesting outside strings; stops scanning once past `limit` (returns limit + 1 then).
int json_nesting_depth(const char* text, size_t size, int limit);

// Parses `text`; bad_input "<origin>: not valid JSON (...)" or "<origin>: JSON nests deeper than N levels".
Result<nlohmann::json> parse_json(std::string_view text, const std::string& origin,
                                  int max_depth = kMaxJsonDepth);

Result<nlohmann::json> read_json_file(const std::string& path);
Status write_json_file(const std::string& path, const nlohmann::json& j);

// An integer JSON value (not a float, not a string) in [min, max]; bad_input naming `what` otherwise.
Result<int64_t> json_integer(const nlohmann::json& value, const std::string& what,
                             int64_t min = std::numeric_limits<int64_t>::min(),
                             int64_t max = std::numeric_limits<int64_t>::max());
// The same into an int (its range unless narrower bounds are given).
Status json_int(const nlohmann::json& value, const std::string& what, int& out,
                int64_t min = std::numeric_limits<int>::min(), int64_t max = std::numeric_limits<int>::max());

// A config field of type T: ints range-checked (never truncated), vectors element by element ("what[i]"),
// anything else through nlohmann's conversion with its type errors reported as bad_input naming `what`.
template <typename T> struct is_std_vector : std::false_type {};
template <typename U, typename A> struct is_std_vector<std::vector<U, A>> : std::true_type {};

template <typename T> Status json_get(const nlohmann::json& value, const std::string& what, T& out) {
    if constexpr (std::is_same_v<T, int>) {
        return json_int(value, what, out);
    } else if constexpr (std::is_same_v<T, int64_t>) {
        H3_ASSIGN_OR_RETURN(out, json_integer(value, what));
        return ok_status();
    } else if constexpr (is_std_vector<T>::value) {
        if (!value.is_array()) return bad_input(what + " must be an array, got " + value.type_name());
        T v(value.size());
        for (size_t i = 0; i < value.size(); ++i)
            H3_TRY(json_get(value[i], what + "[" + std::to_string(i) + "]", v[i]));
        out = std::move(v);
        return ok_status();
    } else {
        try {
            out = value.get<T>();
        } catch (const nlohmann::json::exception& e) {
            return bad_input(what + ": " + e.what());
        }
        return ok_status();
    }
}

} // namespace h3::io
