// The vision goldens' shared fixtures (tests/data/vision, made by tools/reference/make_vision_goldens.py):
// the tiny text_encoder folder they run on and readers for the golden files. Used by test_vision and
// test_ref_conditioner.
#pragma once

#include "io/safetensors.h"
#include "model/tiny/tiny_text.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace h3::testing_support {

inline const std::string kVisionData = std::string(H3_SOURCE_DIR) + "/tests/data/vision";

// A text_encoder folder under the build tree (one per test binary, `test_name`): the golden config + index +
// visual shard, tests/data/text/A's LM weights as the first shard, and the 0-merge tiny tokenizer (ids =
// bytes) in tokenizer/.
inline std::string vision_test_checkpoint(const std::string& test_name) {
    namespace fs = std::filesystem;
    const fs::path d = fs::path(H3_BINARY_DIR) / test_name / "text_encoder";
    fs::remove_all(d);
    fs::create_directories(d);
    for (const char* f : {"config.json", "model.safetensors.index.json", "model-00002-of-00002.safetensors"})
        fs::copy_file(fs::path(kVisionData) / "text_encoder" / f, d / f);
    fs::copy_file(fs::path(H3_SOURCE_DIR) / "tests/data/text/A/text_encoder/model.safetensors",
                  d / "model-00001-of-00002.safetensors");
    EXPECT_TRUE(model::write_tiny_tokenizer((d / "tokenizer").string(), 0).ok());
    return d.string();
}

inline io::SafetensorsFile vision_golden(const std::string& name) {
    auto f = io::SafetensorsFile::open(kVisionData + "/" + name);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(f).value();
}

inline std::vector<int64_t> golden_ints(const io::SafetensorsFile& f, const std::string& name) {
    auto v = to_f32_vector(*f.tensor(name));
    return std::vector<int64_t>(v->begin(), v->end());
}

} // namespace h3::testing_support
