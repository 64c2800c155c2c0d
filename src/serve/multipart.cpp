#include "serve/multipart.h"

#include <algorithm>
#include <cctype>

namespace h3::serve {

namespace {

constexpr size_t kMaxPartHeader = 8192;

bool iequals_prefix(std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(s[i])) !=
            std::tolower(static_cast<unsigned char>(prefix[i])))
            return false;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// A parameter value of a header like `form-data; name="a"; filename="b.png"`: quoted (with \" escapes) or a
// token. False when absent.
bool header_param(std::string_view header, std::string_view key, std::string& out) {
    size_t i = 0;
    while (i < header.size()) {
        const size_t semi = header.find(';', i);
        if (semi == std::string_view::npos) return false;
        i = semi + 1;
        while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
        if (!iequals_prefix(header.substr(i), key) || i + key.size() >= header.size() ||
            header[i + key.size()] != '=')
            continue;
        i += key.size() + 1;
        out.clear();
        if (i < header.size() && header[i] == '"') {
            for (++i; i < header.size() && header[i] != '"'; ++i) {
                if (header[i] == '\\' && i + 1 < header.size()) ++i;
                out += header[i];
            }
            return i < header.size(); // a closing quote
        }
        while (i < header.size() && header[i] != ';' && header[i] != ' ' && header[i] != '\t')
            out += header[i++];
        return true;
    }
    return false;
}

} // namespace

Result<std::string> multipart_boundary(std::string_view content_type) {
    std::string b;
    if (!header_param(content_type, "boundary", b) || b.empty() || b.size() > 70)
        return invalid_argument("body: multipart/form-data without a valid boundary parameter");
    return b;
}

Result<std::vector<FormPart>> parse_multipart(std::string_view body, std::string_view boundary,
                                              size_t max_parts) {
    if (boundary.empty()) return invalid_argument("body: empty multipart boundary");
    const std::string dash = "--" + std::string(boundary);
    const std::string delim = "\r\n" + dash;
    // the first delimiter may open the body (no preamble) or follow a preamble and CRLF
    size_t pos;
    if (body.substr(0, dash.size()) == dash) {
        pos = dash.size();
    } else {
        const size_t d = body.find(delim);
        if (d == std::string_view::npos) return invalid_argument("body: no multipart boundary found");
        pos = d + delim.size();
    }
    std::vector<FormPart> parts;
    for (;;) {
        // after a delimiter: "--" ends the body, else transport padding and CRLF open a part
        if (body.substr(pos, 2) == "--") return parts;
        while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
        if (body.substr(pos, 2) != "\r\n")
            return invalid_argument("body: malformed multipart delimiter line");
        pos += 2;
        if (parts.size() >= max_parts)
            return invalid_argument("body: more than " + std::to_string(max_parts) + " multipart parts");
        const size_t head_end = body.find("\r\n\r\n", pos);
        const bool empty_head = body.substr(pos, 2) == "\r\n";
        if (!empty_head && (head_end == std::string_view::npos || head_end - pos > kMaxPartHeader))
            return invalid_argument("body: multipart part headers missing, unterminated or over 8 KiB");
        FormPart part;
        bool has_disposition = false;
        const std::string_view head = empty_head ? std::string_view() : body.substr(pos, head_end - pos);
        for (size_t l = 0; l <= head.size() && !head.empty();) {
            size_t e = head.find("\r\n", l);
            if (e == std::string_view::npos) e = head.size();
            const std::string_view line = head.substr(l, e - l);
            l = e + 2;
            const size_t colon = line.find(':');
            if (colon == std::string_view::npos)
                return invalid_argument("body: malformed multipart part header");
            const std::string_view key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
            if (iequals_prefix(key, "content-disposition") && key.size() == 19) {
                if (!iequals_prefix(value, "form-data"))
                    return invalid_argument("body: multipart part is not form-data");
                has_disposition = true;
                if (!header_param(value, "name", part.name))
                    return invalid_argument("body: multipart part without a name");
                part.has_filename = header_param(value, "filename", part.filename);
            } else if (iequals_prefix(key, "content-type") && key.size() == 12) {
                part.content_type = std::string(value.substr(0, 256));
            }
            if (e == head.size()) break;
        }
        if (!has_disposition) return invalid_argument("body: multipart part without Content-Disposition");
        const size_t data_start = empty_head ? pos + 2 : head_end + 4;
        const size_t next = body.find(delim, data_start);
        if (next == std::string_view::npos)
            return invalid_argument("body: multipart body ends inside a part");
        part.data = body.substr(data_start, next - data_start);
        parts.push_back(std::move(part));
        pos = next + delim.size();
    }
}

} // namespace h3::serve
