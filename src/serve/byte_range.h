// The Range header of a download (RFC 9110 §14): one byte range is answered 206 with Content-Range; one
// that starts past the end is 416 (Content-Range: bytes */SIZE); several ranges, another unit or a header
// that does not parse are ignored (200, the whole file), which the RFC allows.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace h3::serve {

struct ByteRange {
    enum class Kind { kWhole, kPartial, kUnsatisfiable } kind = Kind::kWhole;
    uint64_t offset = 0, length = 0; // kPartial: the bytes to send; kWhole: 0 and the size
};

ByteRange resolve_byte_range(std::string_view header, uint64_t size);
// "bytes A-B/SIZE" (kPartial) or "bytes */SIZE" (kUnsatisfiable).
std::string content_range_value(const ByteRange& range, uint64_t size);

} // namespace h3::serve
