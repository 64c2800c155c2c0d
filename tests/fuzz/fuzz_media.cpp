// libFuzzer entry: any byte string is a candidate media upload (a ref2va video or audio reference): FFmpeg
// demuxes and decodes it through io::read_media with the reference caps (frame pixels, decoded bytes,
// seconds). Nothing may crash or allocate from the container's declared frame count or dimensions.
#include "fuzz_check.h"
#include "io/media_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = h3::fuzz::scratch_path("input.media");
    if (!h3::fuzz::write_scratch(path, data, size)) return 0;
    h3::io::MediaReadOptions o;
    o.max_seconds = 2;
    o.max_video_bytes = 16 << 20;
    o.max_audio_bytes = 16 << 20;
    o.max_frame_pixels = 1 << 20;
    o.name = "fuzz-input";
    for (bool video : {true, false}) {
        o.video = video;
        auto m = h3::io::read_media(path, o);
        if (!m.ok())
            h3::fuzz::expect_clean(m.status(),
                                   {h3::ErrorCode::kBadInput, h3::ErrorCode::kInvalidArgument,
                                    h3::ErrorCode::kOutOfMemory, h3::ErrorCode::kUnimplemented},
                                   "read_media");
    }
    return 0;
}
