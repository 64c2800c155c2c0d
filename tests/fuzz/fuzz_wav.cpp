// libFuzzer entry: any byte string is a candidate WAV file (audio references in builds without FFmpeg,
// compare inputs). Reading must never crash or allocate from a declared size the file cannot hold.
#include "fuzz_check.h"
#include "io/media_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = h3::fuzz::scratch_path("input.wav");
    if (!h3::fuzz::write_scratch(path, data, size)) return 0;
    auto w = h3::io::read_wav(path);
    if (!w.ok())
        h3::fuzz::expect_clean(w.status(),
                               {h3::ErrorCode::kBadInput, h3::ErrorCode::kInvalidArgument,
                                h3::ErrorCode::kUnimplemented, h3::ErrorCode::kNotFound,
                                h3::ErrorCode::kIoError},
                               "read_wav");
    return 0;
}
