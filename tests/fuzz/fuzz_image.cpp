// libFuzzer entry: any byte string is a candidate PNG/JPEG/WebP upload. Decoding must never crash, read out
// of bounds or allocate from a declared size its data cannot hold; refusals are bad_input / invalid_argument
// / unimplemented naming the buffer.
#include "fuzz_check.h"
#include "io/image_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    h3::io::ImageLimits limits;
    limits.max_pixels = 4 << 20;
    limits.max_side = 4096;
    auto im = h3::io::decode_image(data, size, "fuzz-input", limits);
    if (!im.ok()) {
        h3::fuzz::expect_clean(
            im.status(),
            {h3::ErrorCode::kBadInput, h3::ErrorCode::kInvalidArgument, h3::ErrorCode::kUnimplemented},
            "decode_image");
        if (im.status().message().find("fuzz-input") == std::string::npos) {
            std::fprintf(stderr, "refusal does not name the input: %s\n", im.status().to_string().c_str());
            std::abort();
        }
        return 0;
    }
    const auto& i = im->image;
    if (i.pixels.size() != static_cast<size_t>(i.width) * i.height * 3) std::abort();
    return 0;
}
