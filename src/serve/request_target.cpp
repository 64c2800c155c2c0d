#include "serve/request_target.h"

#include "core/utf8.h"

#include <optional>

namespace h3::serve {

namespace {

bool is_control(unsigned char c) {
    return c < 0x20 || c == 0x7f;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Client text in a message: sanitized, at most 40 bytes.
std::string shown(std::string_view s) {
    std::string t = sanitized_utf8(s.substr(0, 40));
    return s.size() > 40 ? t + "..." : t;
}

// Percent-decodes `s` once ('+' is a space when `plus_is_space`); nullopt on a malformed escape.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '%') {
            if (i + 2 >= s.size()) return std::nullopt;
            const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

bool has_control(std::string_view s) {
    for (char c : s)
        if (is_control(static_cast<unsigned char>(c))) return true;
    return false;
}

ParsedTarget refuse(int status, std::string message) {
    ParsedTarget p;
    p.status = status;
    p.message = std::move(message);
    return p;
}

} // namespace

const std::string* RequestTarget::param(std::string_view name) const {
    for (const auto& [k, v] : params)
        if (k == name) return &v;
    return nullptr;
}

ParsedTarget parse_request_target(std::string_view raw, const TargetLimits& limits) {
    if (raw.size() > limits.max_bytes)
        return refuse(414, "the request target is " + std::to_string(raw.size()) + " bytes, more than " +
                               std::to_string(limits.max_bytes));
    if (raw.empty() || raw.front() != '/')
        return refuse(400, "the request target must be a path starting with '/'");
    for (char c : raw) {
        const auto u = static_cast<unsigned char>(c);
        if (is_control(u) || c == ' ' || c == '#')
            return refuse(400, "the request target holds a raw control character, space or '#'");
    }
    const size_t q = raw.find('?');
    const std::string_view path = raw.substr(0, q);
    const std::string_view query = q == std::string_view::npos ? std::string_view() : raw.substr(q + 1);
    if (query.size() > limits.max_query_bytes)
        return refuse(414, "the query is " + std::to_string(query.size()) + " bytes, more than " +
                               std::to_string(limits.max_query_bytes));

    ParsedTarget out;
    // ---- the path: split on the raw '/', each segment decoded once
    std::string decoded;
    size_t start = 1;
    for (;;) {
        const size_t slash = path.find('/', start);
        const std::string_view seg =
            path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
        auto d = percent_decode(seg, false);
        if (!d) return refuse(400, "the path holds a malformed percent-escape");
        if (has_control(*d)) return refuse(400, "the path holds an encoded control character (such as %00)");
        if (d->find('/') != std::string::npos) return refuse(400, "the path holds an encoded '/' (%2F)");
        if (*d == "." || *d == "..") return refuse(400, "the path holds a '.' or '..' segment");
        decoded += '/';
        decoded += *d;
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
    out.target.path = std::move(decoded);

    // ---- the query: name[=value] pieces between '&'
    if (q == std::string_view::npos) return out;
    size_t pieces = 0;
    size_t pos = 0;
    for (;;) {
        const size_t amp = query.find('&', pos);
        const std::string_view piece =
            query.substr(pos, amp == std::string_view::npos ? std::string_view::npos : amp - pos);
        if (++pieces > limits.max_params)
            return refuse(400,
                          "the query holds more than " + std::to_string(limits.max_params) + " parameters");
        if (!piece.empty()) {
            const size_t eq = piece.find('=');
            auto name = percent_decode(piece.substr(0, eq), true);
            auto value = percent_decode(
                eq == std::string_view::npos ? std::string_view() : piece.substr(eq + 1), true);
            if (!name || !value) return refuse(400, "the query holds a malformed percent-escape");
            if (name->empty()) return refuse(400, "the query holds a parameter without a name");
            if (has_control(*name) || has_control(*value))
                return refuse(400, "query parameter '" + shown(*name) +
                                       "' holds an encoded control character (such as %00)");
            if (out.target.param(*name))
                return refuse(400, "query parameter '" + shown(*name) + "' is given twice");
            out.target.params.emplace_back(std::move(*name), std::move(*value));
        }
        if (amp == std::string_view::npos) break;
        pos = amp + 1;
    }
    return out;
}

} // namespace h3::serve
