// Reading JSON files with errors that name the file and the field.
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <string>

namespace h3::io {

Result<nlohmann::json> read_json_file(const std::string& path);
Status write_json_file(const std::string& path, const nlohmann::json& j);

} // namespace h3::io
