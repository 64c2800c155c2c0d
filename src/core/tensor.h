// Tensor: a typed, shaped, strided view into a Storage (host, pinned, device or mmap).
#pragma once

#include "core/check.h"
#include "core/dtype.h"
#include "core/storage.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace h3 {

constexpr int kMaxDims = 5;

class Shape {
public:
    Shape() = default;
    Shape(std::initializer_list<int64_t> dims);
    explicit Shape(const std::vector<int64_t>& dims);

    int rank() const { return rank_; }
    int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
    int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
    int64_t numel() const;
    std::vector<int64_t> to_vector() const { return {dims_.begin(), dims_.begin() + rank_}; }
    std::string to_string() const; // "[3, 4]"
    bool operator==(const Shape& o) const;

private:
    std::array<int64_t, kMaxDims> dims_{};
    int rank_ = 0;
};

class Tensor {
public:
    Tensor() = default;

    // New contiguous tensors. Host memory is zeroed; device memory is not.
    static Result<Tensor> empty(const Shape& shape, DType dtype, Device device = Device::cpu());
    // Host-only convenience that aborts on allocation failure (for tests, tools and small tables).
    static Tensor host(const Shape& shape, DType dtype);
    // A contiguous view over existing storage starting at `byte_offset`.
    static Tensor from_storage(std::shared_ptr<Storage> storage, size_t byte_offset, const Shape& shape,
                               DType dtype);

    bool defined() const { return storage_ != nullptr; }
    DType dtype() const { return dtype_; }
    Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
    const Shape& shape() const { return shape_; }
    int rank() const { return shape_.rank(); }
    int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
    int64_t stride(int i) const { return strides_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
    int64_t numel() const { return shape_.numel(); }
    size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
    bool is_contiguous() const;
    bool read_only() const { return storage_ && storage_->read_only(); }
    const std::shared_ptr<Storage>& storage() const { return storage_; }
    size_t byte_offset() const { return byte_offset_; }

    void* data() const { return static_cast<uint8_t*>(storage_->data()) + byte_offset_; }
    template <typename T> T* data_as() const { return static_cast<T*>(data()); }

    // Views (no copy). view() needs a contiguous tensor; one dim may be -1.
    Tensor view(std::initializer_list<int64_t> dims) const;
    Tensor view(const Shape& shape) const;
    Tensor slice(int dim, int64_t start, int64_t end) const;

    // Copies.
    Result<Tensor> to(Device device, void* stream = nullptr) const;
    Result<Tensor> contiguous() const;                           // host only
    Result<Tensor> to_dtype(DType dtype) const;                  // host only, contiguous result
    Status copy_from(const Tensor& src, void* stream = nullptr); // same shape and dtype, both contiguous

    // Host-only scalar access through f64 (slow; for tests and references).
    double get(std::initializer_list<int64_t> index) const;
    void set(std::initializer_list<int64_t> index, double v);

    std::string describe() const; // "bf16[3, 4] cuda:0"

private:
    std::shared_ptr<Storage> storage_;
    size_t byte_offset_ = 0;
    DType dtype_ = DType::kF32;
    Shape shape_;
    std::array<int64_t, kMaxDims> strides_{};
};

// Contiguous host copy of `t` converted to f32 (any float or int dtype).
Result<std::vector<float>> to_f32_vector(const Tensor& t);
// A host tensor holding `values` (converted to `dtype`).
Tensor host_tensor_from(const std::vector<float>& values, const Shape& shape, DType dtype = DType::kF32);

} // namespace h3
