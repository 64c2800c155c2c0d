// libFuzzer entry: the input is an HTTP request target as the request line spells it ("/path?query"). It is
// parsed as the server parses it (serve/request_target.h): a refusal must be a 400 or 414 with a message;
// an accepted target must satisfy what the routes rely on (a path starting with '/', no control byte in it
// or in any parameter, unique parameter names within the count bound), and must parse again to the same path
// and parameters once encoded back (one decoding, never two).
#include "serve/request_target.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void fail(const char* what) {
    std::fprintf(stderr, "request target: %s\n", what);
    std::abort();
}

bool has_control(const std::string& s) {
    for (char c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
    return false;
}

// Every byte outside [A-Za-z0-9-._~] as %XX.
std::string encoded(const std::string& s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
            c == '.' || c == '_' || c == '~') {
            out.push_back(ch);
        } else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string raw(reinterpret_cast<const char*>(data), size);
    const h3::serve::TargetLimits limits{};
    const h3::serve::ParsedTarget p = h3::serve::parse_request_target(raw, limits);
    if (!p.ok()) {
        if (p.status != 400 && p.status != 414) fail("a refusal that is neither 400 nor 414");
        if (p.message.empty()) fail("a refusal without a message");
        return 0;
    }
    const h3::serve::RequestTarget& t = p.target;
    if (raw.size() > limits.max_bytes) fail("a target over the byte bound was accepted");
    if (t.path.empty() || t.path[0] != '/') fail("a path that does not start with '/'");
    if (has_control(t.path)) fail("a control byte in an accepted path");
    if (t.params.size() > limits.max_params) fail("more parameters than the bound");
    for (size_t i = 0; i < t.params.size(); ++i) {
        const auto& [name, value] = t.params[i];
        if (name.empty()) fail("an empty parameter name");
        if (has_control(name) || has_control(value)) fail("a control byte in an accepted parameter");
        for (size_t j = 0; j < i; ++j)
            if (t.params[j].first == name) fail("a parameter name given twice");
        if (t.param(name) != &value) fail("param() does not find the first parameter of a name");
    }
    // encoded back (each segment and parameter percent-encoded) it parses to the same thing
    std::string again;
    size_t start = 1;
    for (;;) {
        const size_t slash = t.path.find('/', start);
        again += "/" + encoded(t.path.substr(start,
                                             slash == std::string::npos ? std::string::npos : slash - start));
        if (slash == std::string::npos) break;
        start = slash + 1;
    }
    for (size_t i = 0; i < t.params.size(); ++i)
        again += (i ? "&" : "?") + encoded(t.params[i].first) + "=" + encoded(t.params[i].second);
    const h3::serve::TargetLimits loose{
        .max_bytes = 1 << 20, .max_query_bytes = 1 << 20, .max_params = 1 << 20};
    const h3::serve::ParsedTarget q = h3::serve::parse_request_target(again, loose);
    if (!q.ok()) fail("the re-encoded target was refused");
    if (q.target.path != t.path) fail("the re-encoded path parses to another path");
    if (q.target.params != t.params) fail("the re-encoded query parses to other parameters");
    return 0;
}
