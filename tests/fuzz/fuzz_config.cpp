// libFuzzer entry: any byte string is a candidate config.json / model_index.json. It is parsed with the
// bounded-nesting parser and read as every component config (transformer, video VAE, audio VAE, text and
// vision towers), then laid out as a checkpoint's model_index.json and discovered. Integers must be range
// checked (never truncated), nothing may crash, and refusals are bad_input / not_found / unimplemented.
#include "fuzz_check.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "model/audio_vae/audio_vae.h"
#include "model/dit/dit_config.h"
#include "model/text/text_config.h"
#include "model/video_vae/video_vae.h"
#include "model/vision/vision_config.h"

#include <filesystem>

namespace {

void clean(const h3::Status& s, const char* what) {
    h3::fuzz::expect_clean(s,
                           {h3::ErrorCode::kBadInput, h3::ErrorCode::kNotFound, h3::ErrorCode::kUnimplemented,
                            h3::ErrorCode::kInvalidArgument},
                           what);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto j = h3::io::parse_json(text, "fuzz-input");
    if (!j.ok()) {
        clean(j.status(), "parse_json");
        return 0;
    }
    if (auto c = h3::model::DitConfig::from_json(*j, "fuzz"); !c.ok()) clean(c.status(), "DitConfig");
    if (auto c = h3::model::VideoVaeConfig::from_json(*j, "fuzz"); !c.ok())
        clean(c.status(), "VideoVaeConfig");
    else
        (void)c->validate_encoder("fuzz");
    if (auto c = h3::model::AudioVaeConfig::from_json(*j, "fuzz"); !c.ok())
        clean(c.status(), "AudioVaeConfig");
    else
        (void)c->validate_encoder("fuzz");
    if (auto c = h3::model::TextConfig::from_json(*j, "fuzz"); !c.ok()) clean(c.status(), "TextConfig");
    if (auto c = h3::model::VisionConfig::from_json(*j, "fuzz"); !c.ok()) clean(c.status(), "VisionConfig");
    // as the model_index.json of a checkpoint root
    static const std::string root = h3::fuzz::scratch_path("ckpt");
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    if (!h3::fuzz::write_scratch(root + "/model_index.json", data, size)) return 0;
    if (auto d = h3::io::discover_checkpoint(root); !d.ok()) clean(d.status(), "discover_checkpoint");
    return 0;
}
