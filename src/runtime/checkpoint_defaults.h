// A checkpoint's own request defaults: the small sidecar `h3_defaults.json` at its root (also beside a bare
// transformer folder). A checkpoint trained at one geometry (the demo model, models/h3-demo: 128x64, 107
// frames, 30 steps) declares it there, and every front end (CLI, server, Python, the web page) uses it
// through the job builder when a request does not say; a checkpoint without one gets the release defaults. It
// may also list the words its captions were written in (`vocabulary`): a prompt with other words gets a
// warning.
//
//   {"what": "...", "size": "128x64", "frames": 107, "num_inference_steps": 30,
//    "reference_image_edge": 64, "vocabulary": ["a", "ball", ...]}
//
// Every field is optional; unknown fields are refused (a misspelt default would be silently ignored).
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace h3::runtime {

inline constexpr const char* kCheckpointDefaultsFile = "h3_defaults.json";
// The one limit of num_inference_steps (sigma grid points), for every front end (the job builder's).
inline constexpr int kMaxInferenceSteps = 1000;

struct CheckpointDefaults {
    std::optional<std::string> size;            // "WxH"
    std::optional<int64_t> frames;              // at 24 fps
    std::optional<int64_t> num_inference_steps; // in [2, kMaxInferenceSteps]
    std::optional<int> reference_image_edge;    // ref2va's image short edge the checkpoint trained with
    std::vector<std::string> vocabulary;        // lower-case caption words; empty: none declared
    std::string path;                           // the sidecar (messages)

    // "128x64, 107 frames, 30 steps" (what is declared)
    std::string describe() const;
    // The defaults as JSON (GET /v1/models): size, frames, num_inference_steps (null when not declared).
    nlohmann::json to_json() const;
};

// Reads `<root>/h3_defaults.json` (or the one beside a transformer folder given as `root`): nullopt when the
// checkpoint has none; bad_input naming the file and the field when it is malformed.
Result<std::optional<CheckpointDefaults>> read_checkpoint_defaults(const std::string& root);
// The same checks on parsed JSON (`origin` names the source in errors).
Result<CheckpointDefaults> parse_checkpoint_defaults(const nlohmann::json& j, const std::string& origin);

// The prompt's words (ASCII letters lower-cased, split at anything but letters, digits, '\'' and bytes
// >= 0x80; `<...>` placeholders such as "<Picture 1>" dropped) that `vocabulary` lacks, each once, in
// prompt order. Empty when the vocabulary is empty.
std::vector<std::string> words_outside_vocabulary(const std::string& prompt,
                                                  const std::vector<std::string>& vocabulary);

} // namespace h3::runtime
