// libFuzzer entry: the input is a multipart/form-data body (boundary "XyZ") of a submission, as the server
// receives it after the body limit: parts are split, text fields checked (UTF-8, strict integers, `cache` as
// bounded JSON), first_frame/last_frame decoded as images, reference parts staged in private temporary files
// and read. Every refusal must be a clean status; nothing may crash or leak a temporary file.
#include "fuzz_check.h"
#include "serve/submission.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    h3::serve::SubmissionLimits limits;
    limits.request.image.max_pixels = 1 << 20; // small images only: the fuzzer looks for crashes, not pixels
    limits.request.image.max_side = 2048;
    limits.reference.max_video_bytes = 8 << 20;
    limits.reference.max_audio_bytes = 8 << 20;
    limits.reference.max_frame_pixels = 1 << 20;
    limits.reference.image = limits.request.image;
    std::string field;
    auto rq = h3::serve::read_submission("multipart/form-data; boundary=XyZ",
                                         std::string_view(reinterpret_cast<const char*>(data), size), limits,
                                         field);
    if (!rq.ok())
        h3::fuzz::expect_clean(rq.status(),
                               {h3::ErrorCode::kInvalidArgument, h3::ErrorCode::kBadInput,
                                h3::ErrorCode::kNotFound, h3::ErrorCode::kUnimplemented},
                               "read_submission");
    else if (rq->input.cache)
        (void)rq->input.cache->dump();
    return 0;
}
