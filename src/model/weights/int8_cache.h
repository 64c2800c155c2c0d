// On-disk cache of int8 masters, like the AdaLN cache: one safetensors file per (checkpoint identity,
// component) holding "<name>" (i8 [N, K]) and "<name>.scale" (f32 [N]) for every quantized matrix. Read back
// as read-only mmap views, so the quantization runs once per checkpoint and every process on the host
// streams from the same page cache. A file that does not match (other shapes, another identity) is ignored
// and rewritten, never trusted.
#pragma once

#include "model/weights/weight_master.h"

#include <optional>
#include <string>
#include <vector>

namespace h3::model {

// <dir>/int8-<hash of identity and component>.safetensors
std::string int8_cache_path(const std::string& dir, const std::string& identity,
                            const std::string& component);

// names[l][i]: the tensor names of layer l's masters; shapes[i]: their shapes (the same for every layer).
// nullopt when the file is absent or does not match (the reason is logged).
Result<std::optional<std::vector<std::vector<WeightMaster>>>>
read_int8_cache(const std::string& path, const std::string& identity,
                const std::vector<std::vector<std::string>>& names, const std::vector<Shape>& shapes);

Status write_int8_cache(const std::string& path, const std::string& identity,
                        const std::vector<std::vector<std::string>>& names,
                        const std::vector<std::vector<WeightMaster>>& masters);

} // namespace h3::model
