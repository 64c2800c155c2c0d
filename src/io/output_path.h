// A path a job will write, made ready before any compute: checked (not empty, not a folder where a file is
// wanted, an allowed extension) and its missing parent folders created, so that a bad --output fails in
// milliseconds instead of after the whole generation. Errors are bad_input / io_error naming the path; the
// caller prefixes its field.
#pragma once

#include "core/status.h"

#include <string>
#include <vector>

namespace h3::io {

enum class OutputPathKind { kFile, kDirectory };

struct OutputPathRule {
    OutputPathKind kind = OutputPathKind::kFile;
    // kFile: the extensions accepted (".json"; empty: any); `refused`: extensions that are surely another
    // output's (a media file given where latents go), each refused naming what the path is for.
    std::vector<std::string> extensions = {}, refused = {};
    std::string what = {}; // "a safetensors file", for messages
};

// Creates the missing parent folders (a kDirectory path: the folder itself) and checks that the file can be
// created or replaced there (write permission on the folder, and on the file when it exists).
Status prepare_output_path(const std::string& path, const OutputPathRule& rule);

} // namespace h3::io
