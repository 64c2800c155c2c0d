// The request target of an HTTP request (RFC 9112 §3.2, origin form "/path?query"), parsed strictly and once:
// the routes see the decoded path and parameters, never a string cut short at an encoded NUL.
//   - the target starts with '/', holds no raw control byte, space or '#', and is at most `max_bytes` long
//     (414 past it);
//   - the path is split at '/' first, then each segment is percent-decoded once; a malformed escape, a
//     decoded control byte (%00..%1F, %7F), a decoded '/' inside a segment, and a "." or ".." segment are
//     refused (400), so the exact decoded path is what routes match;
//   - the query is at most `max_query_bytes` long (414) and holds at most `max_params` parameters (400);
//     '+' is a space, each name and value is percent-decoded once, a control byte, an empty name or a name
//     given twice is refused (400).
// No HTTP library in here (the fuzz target tests/fuzz/fuzz_request_target.cpp runs it alone).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace h3::serve {

struct TargetLimits {
    size_t max_bytes = 8192;       // the whole target
    size_t max_query_bytes = 4096; // after the '?'
    size_t max_params = 32;        // name[=value] pieces between '&' (empty pieces count)
};

struct RequestTarget {
    std::string path;                                        // decoded: "/" + segments joined by '/'
    std::vector<std::pair<std::string, std::string>> params; // decoded, in order, names unique
    // The value of parameter `name`, null when absent.
    const std::string* param(std::string_view name) const;
};

struct ParsedTarget {
    int status = 200;    // 400 or 414 when refused
    std::string message; // why it was refused (client text shown sanitized)
    RequestTarget target;
    bool ok() const { return status == 200; }
};

ParsedTarget parse_request_target(std::string_view raw, const TargetLimits& limits = {});

} // namespace h3::serve
