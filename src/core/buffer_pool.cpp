#include "core/buffer_pool.h"

#include "core/one_time_work.h"

namespace h3 {

Result<Tensor> BufferPool::take(const Shape& shape, DType dtype) {
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& b : buffers_)
        if (b.use_count() == 1 && b->bytes() == bytes) return Tensor::from_storage(b, 0, shape, dtype);
    H3_ASSIGN_OR_RETURN(std::shared_ptr<Storage> s, allocate(bytes, device_));
    buffers_.push_back(s);
    note_workspace_allocation(bytes);
    return Tensor::from_storage(s, 0, shape, dtype);
}

size_t BufferPool::bytes_held() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = 0;
    for (const auto& b : buffers_) n += b->bytes();
    return n;
}

} // namespace h3
