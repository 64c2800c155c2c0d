#include "io/json_file.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace h3::io {

int json_nesting_depth(const char* p, size_t n, int limit) {
    int depth = 0, max_depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < n; ++i) {
        const char c = p[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            max_depth = std::max(max_depth, ++depth);
            if (max_depth > limit) return max_depth;
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
    return max_depth;
}

Result<nlohmann::json> parse_json(std::string_view text, const std::string& origin, int max_depth) {
    if (json_nesting_depth(text.data(), text.size(), max_depth) > max_depth)
        return bad_input(origin + ": JSON nests deeper than " + std::to_string(max_depth) + " levels");
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
        return bad_input(origin + ": not valid JSON (" + e.what() + ")");
    }
}

Result<nlohmann::json> read_json_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return not_found("cannot open JSON file " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_json(ss.str(), "file " + path);
}

Status write_json_file(const std::string& path, const nlohmann::json& j) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return io_error("cannot write " + path);
    out << j.dump(2) << "\n";
    if (!out) return io_error("write to " + path + " failed");
    return ok_status();
}

Result<int64_t> json_integer(const nlohmann::json& v, const std::string& what, int64_t min, int64_t max) {
    const auto range = [&] { return "[" + std::to_string(min) + ", " + std::to_string(max) + "]"; };
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || static_cast<int64_t>(u) > max ||
            static_cast<int64_t>(u) < min)
            return bad_input(what + " = " + std::to_string(u) + " is outside " + range());
        return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) {
        const int64_t i = v.get<int64_t>();
        if (i < min || i > max) return bad_input(what + " = " + std::to_string(i) + " is outside " + range());
        return i;
    }
    return bad_input(what + " must be an integer, got " + std::string(v.type_name()));
}

Status json_int(const nlohmann::json& v, const std::string& what, int& out, int64_t min, int64_t max) {
    H3_ASSIGN_OR_RETURN(int64_t i,
                        json_integer(v, what, std::max<int64_t>(min, std::numeric_limits<int>::min()),
                                     std::min<int64_t>(max, std::numeric_limits<int>::max())));
    out = static_cast<int>(i);
    return ok_status();
}

} // namespace h3::io
