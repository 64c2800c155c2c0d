// safetensors files: a validating reader over mmap (tensors are read-only views until copied) and a writer.
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets:[b,e]},
// "__metadata__": {str: str}}, then the data section; offsets are relative to the data section.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace h3::io {

// Headers larger than this are rejected before parsing (the format's own reference limit is 100 MB).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

// What one file may declare; a caller that knows its files (a LoRA reader) sets tighter bounds. Both are
// checked before the header is parsed (the length) or as it is (the count, which stops the parse).
struct SafetensorsLimits {
    uint64_t max_header_bytes = kMaxSafetensorsHeaderBytes;
    size_t max_tensors = SIZE_MAX;
};

struct TensorInfo {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    uint64_t begin = 0; // byte range in the data section
    uint64_t end = 0;
};

class SafetensorsFile {
public:
    // Opens and validates: header length within the file and bound, valid JSON object, every entry with a
    // known dtype, integer non-negative shape (rank <= 5), `prod(shape)·dtype size == end − begin`, ranges
    // inside the data section and non-overlapping. Errors name the file and the tensor.
    static Result<SafetensorsFile> open(const std::string& path, const SafetensorsLimits& limits = {});
    // Same validation over an in-memory buffer (used by the fuzzer and tests); `label` names it in errors.
    static Status validate_buffer(const uint8_t* data, size_t size, const std::string& label,
                                  const SafetensorsLimits& limits = {});

    const std::string& path() const { return path_; }
    const std::vector<TensorInfo>& tensors() const { return infos_; } // in header order
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    bool contains(const std::string& name) const;
    const TensorInfo* find(const std::string& name) const;
    // A read-only host view into the mapping.
    Result<Tensor> tensor(const std::string& name) const;

private:
    std::string path_;
    std::shared_ptr<MappedFile> file_;
    uint64_t data_start_ = 0;
    std::vector<TensorInfo> infos_;
    std::map<std::string, size_t> index_;
    std::map<std::string, std::string> metadata_;
};

// Writes tensors (any device; copied to host) in the given order with 8-byte-aligned header padding.
struct NamedTensor {
    std::string name;
    Tensor tensor;
};
Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

} // namespace h3::io
