// libFuzzer entry: any byte string is a candidate POST /v1/videos JSON body. Parsing must never crash,
// recurse without bound (the nesting is bounded before nlohmann parses) or throw; a refusal is an
// invalid_argument naming a field (the wire schema, serve/wire; the job builder behind it is not linked).
#include "fuzz_check.h"
#include "serve/wire/video_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string field;
    auto rq =
        h3::api::read_video_body_text(std::string_view(reinterpret_cast<const char*>(data), size), &field);
    if (!rq.ok()) {
        h3::fuzz::expect_clean(rq.status(), {h3::ErrorCode::kInvalidArgument}, "read_video_body_text");
        if (field.empty()) {
            std::fprintf(stderr, "refusal without a field: %s\n", rq.status().to_string().c_str());
            std::abort();
        }
        return 0;
    }
    if (rq->input.cache) (void)rq->input.cache->dump();
    return 0;
}
