// multipart/form-data (RFC 7578) over a whole, already size-capped body: the parts' names, file names, types
// and contents (views into the body). Bounded: at most `max_parts` parts, part headers of at most 8 KiB.
// Errors are invalid_argument naming what was wrong ("body: ...").
#pragma once

#include "core/status.h"

#include <string>
#include <string_view>
#include <vector>

namespace h3::serve {

struct FormPart {
    std::string name;
    std::string filename;      // empty for plain fields
    bool has_filename = false; // a file part (filename="" counts)
    std::string content_type;
    std::string_view data; // into the body
};

// The boundary parameter of a multipart/form-data Content-Type (quoted or not, 1..70 characters).
Result<std::string> multipart_boundary(std::string_view content_type);

Result<std::vector<FormPart>> parse_multipart(std::string_view body, std::string_view boundary,
                                              size_t max_parts = 64);

} // namespace h3::serve
