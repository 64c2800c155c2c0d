// A request body as it arrives, decoded on the fly (Content-Encoding identity, gzip, deflate or br) into a
// buffer that never passes the limit: the limit counts decoded bytes, so neither chunked transfer nor a
// compression bomb reads more than it into memory. Fed chunk by chunk by the HTTP layer.
#pragma once

#include "core/status.h"

#include <memory>
#include <string>
#include <string_view>

namespace h3::serve {

class BodyDecoder {
public:
    // `encoding` is the Content-Encoding header ("" or "identity", "gzip", "x-gzip", "deflate", "br");
    // anything else, or a list of several, is unimplemented (415).
    static Result<std::unique_ptr<BodyDecoder>> create(std::string_view encoding, size_t max_bytes);
    virtual ~BodyDecoder() = default;

    // Appends the decoded bytes of `chunk`. kOutOfMemory when the decoded body would pass max_bytes (413),
    // kBadInput when the encoded stream is corrupt (400).
    virtual Status feed(std::string_view chunk) = 0;
    // The end of the body: kBadInput when a compressed stream stopped before its end.
    virtual Status finish() = 0;

    std::string& body() { return body_; }
    size_t max_bytes() const { return max_; }

protected:
    explicit BodyDecoder(size_t max_bytes) : max_(max_bytes) {}
    Status append(const char* data, size_t n);
    std::string body_;
    size_t max_;
};

} // namespace h3::serve
