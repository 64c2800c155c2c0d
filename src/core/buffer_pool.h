// Buffers handed out again once nothing views them: for a loop that allocates the same shapes over and over
// (the video encoder's activations, tile after tile), so that after the first pass it allocates nothing and,
// on CUDA, frees nothing (cudaFree waits for the whole device). A buffer is free again when the pool holds
// its only reference; work queued on one stream may still read it, which is safe for the next user on that
// same stream (stream order), as with any caching allocator.
#pragma once

#include "core/tensor.h"

#include <memory>
#include <mutex>
#include <vector>

namespace h3 {

class BufferPool {
public:
    explicit BufferPool(Device device) : device_(device) {}
    // A contiguous tensor over a free buffer of exactly its byte size, or a new one. Not initialised.
    Result<Tensor> take(const Shape& shape, DType dtype);
    Device device() const { return device_; }
    size_t bytes_held() const;

private:
    Device device_;
    mutable std::mutex mutex_;
    std::vector<std::shared_ptr<Storage>> buffers_;
};

} // namespace h3
