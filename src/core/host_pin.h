// Page-locking of host memory that exists already (read-only mmap views of safetensors files, host weight
// masters): cudaHostRegister over page-rounded ranges, ranges that share a page merged first (a page can be
// registered once), every range unregistered on destruction.
#pragma once

#include "core/status.h"

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace h3 {

class HostPinning {
public:
    struct Range {
        const void* ptr = nullptr;
        size_t bytes = 0;
    };
    // `read_only`: the ranges lie in a read-only mapping (registered read-only, so the pages stay the page
    // cache's and other processes mapping the same file share them). CUDA builds only.
    static Result<std::unique_ptr<HostPinning>> pin(std::vector<Range> ranges, bool read_only);
    ~HostPinning();
    HostPinning(const HostPinning&) = delete;
    HostPinning& operator=(const HostPinning&) = delete;

    size_t bytes() const { return bytes_; } // page-rounded bytes locked
    size_t regions() const { return regions_.size(); }

    // The page-rounded, merged ranges `ranges` turns into (sorted by address): what pin() registers.
    static std::vector<Range> merged_pages(std::vector<Range> ranges, size_t page_size);

private:
    HostPinning() = default;
    std::vector<void*> regions_;
    size_t bytes_ = 0;
};

} // namespace h3
