// libFuzzer entry: any byte string is a candidate POST /v1/videos JSON body. Parsing must never crash,
// recurse without bound (the nesting is bounded before nlohmann parses) or throw; a refusal is an
// invalid_argument naming a field, and an accepted request serializes back to JSON.
#include "api/video_request.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string field;
    auto rq = h3::api::parse_video_request_text(std::string_view(reinterpret_cast<const char*>(data), size),
                                                {}, &field);
    if (!rq.ok()) {
        h3::fuzz::expect_clean(rq.status(), {h3::ErrorCode::kInvalidArgument}, "parse_video_request_text");
        if (field.empty()) {
            std::fprintf(stderr, "refusal without a field: %s\n", rq.status().to_string().c_str());
            std::abort();
        }
        return 0;
    }
    (void)rq->to_json().dump();
    return 0;
}
