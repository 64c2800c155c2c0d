// libFuzzer entry: any byte string is a candidate safetensors file; validation must never crash, hang or
// read outside the buffer, and every rejection must be a bad_input status naming the buffer.
#include "io/safetensors.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    h3::Status st = h3::io::SafetensorsFile::validate_buffer(data, size, "fuzz-input");
    if (!st.ok() &&
        (st.code() != h3::ErrorCode::kBadInput || st.message().find("fuzz-input") == std::string::npos)) {
        std::fprintf(stderr, "unexpected status: %s\n", st.to_string().c_str());
        std::abort();
    }
    return 0;
}
