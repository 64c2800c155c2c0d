// A tiny checkpoint (model/tiny) written once into a test's work folder and reused by its other cases while
// its model_index.json exists (a folder left half-written by a killed run is written again).
#pragma once

#include "model/tiny/tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace h3::test {

inline std::string tiny_checkpoint_once(const std::filesystem::path& dir, uint64_t seed,
                                        model::TinyVariant variant = model::TinyVariant::kBase,
                                        const model::TinyGeometry& geometry = {}) {
    if (!std::filesystem::exists(dir / "model_index.json")) {
        std::filesystem::remove_all(dir);
        const Status s = model::write_tiny_checkpoint(
            {.dir = dir.string(), .seed = seed, .geometry = geometry, .variant = variant});
        EXPECT_TRUE(s.ok()) << dir.string() << ": " << s.to_string();
    }
    return dir.string();
}

} // namespace h3::test
