#include "core/tensor.h"

#include "core/cuda_api.h"

#include <cstring>
#include <sstream>

namespace h3 {

Shape::Shape(std::initializer_list<int64_t> dims) {
    H3_CHECK(dims.size() <= kMaxDims, "tensor rank " << dims.size() << " exceeds " << kMaxDims);
    for (int64_t d : dims) dims_[static_cast<size_t>(rank_++)] = d;
}

Shape::Shape(const std::vector<int64_t>& dims) {
    H3_CHECK(dims.size() <= kMaxDims, "tensor rank " << dims.size() << " exceeds " << kMaxDims);
    for (int64_t d : dims) dims_[static_cast<size_t>(rank_++)] = d;
}

int64_t Shape::numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
    return n;
}

std::string Shape::to_string() const {
    std::ostringstream os;
    os << "[";
    for (int i = 0; i < rank_; ++i) os << (i ? ", " : "") << dims_[static_cast<size_t>(i)];
    os << "]";
    return os.str();
}

bool Shape::operator==(const Shape& o) const {
    if (rank_ != o.rank_) return false;
    for (int i = 0; i < rank_; ++i)
        if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
    return true;
}

namespace {
std::array<int64_t, kMaxDims> contiguous_strides(const Shape& s) {
    std::array<int64_t, kMaxDims> st{};
    int64_t acc = 1;
    for (int i = s.rank() - 1; i >= 0; --i) {
        st[static_cast<size_t>(i)] = acc;
        acc *= s[i];
    }
    return st;
}
} // namespace

Result<Tensor> Tensor::empty(const Shape& shape, DType dtype, Device device) {
    for (int i = 0; i < shape.rank(); ++i)
        if (shape[i] < 0) return invalid_argument("negative dimension in shape " + shape.to_string());
    size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
    H3_ASSIGN_OR_RETURN(auto storage, allocate(bytes, device));
    return from_storage(std::move(storage), 0, shape, dtype);
}

Tensor Tensor::host(const Shape& shape, DType dtype) {
    auto r = empty(shape, dtype, Device::cpu());
    H3_CHECK(r.ok(), r.status().to_string());
    return std::move(r).value();
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, size_t byte_offset, const Shape& shape,
                            DType dtype) {
    Tensor t;
    t.storage_ = std::move(storage);
    t.byte_offset_ = byte_offset;
    t.dtype_ = dtype;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    H3_CHECK(byte_offset + t.nbytes() <= t.storage_->bytes(), "view " << shape.to_string() << " at offset "
                                                                      << byte_offset << " exceeds storage of "
                                                                      << t.storage_->bytes() << " bytes");
    return t;
}

bool Tensor::is_contiguous() const {
    int64_t acc = 1;
    for (int i = rank() - 1; i >= 0; --i) {
        if (shape_[i] != 1 && strides_[static_cast<size_t>(i)] != acc) return false;
        acc *= shape_[i];
    }
    return true;
}

Tensor Tensor::view(std::initializer_list<int64_t> dims) const {
    return view(Shape(dims));
}

Tensor Tensor::view(const Shape& shape_in) const {
    H3_CHECK(is_contiguous(), "view() of a non-contiguous tensor " << describe());
    Shape shape = shape_in;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < shape.rank(); ++i) {
        if (shape[i] == -1) {
            H3_CHECK(infer < 0, "view() with two -1 dims");
            infer = i;
        } else {
            known *= shape[i];
        }
    }
    if (infer >= 0) shape[infer] = known ? numel() / known : 0;
    H3_CHECK(shape.numel() == numel(), "view " << shape.to_string() << " of " << describe());
    Tensor t = *this;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    return t;
}

Tensor Tensor::slice(int d, int64_t start, int64_t end) const {
    if (d < 0) d += rank();
    H3_CHECK(d >= 0 && d < rank(), "slice dim " << d << " of " << describe());
    H3_CHECK(0 <= start && start <= end && end <= shape_[d],
             "slice [" << start << ", " << end << ") of dim " << d << " of " << describe());
    Tensor t = *this;
    t.byte_offset_ += static_cast<size_t>(start * strides_[static_cast<size_t>(d)]) * dtype_size(dtype_);
    t.shape_[d] = end - start;
    return t;
}

Result<Tensor> Tensor::contiguous() const {
    if (!device().is_cpu()) return invalid_argument("contiguous() is host-only, got " + describe());
    if (is_contiguous()) return *this;
    Tensor out = Tensor::host(shape_, dtype_);
    size_t es = dtype_size(dtype_);
    std::array<int64_t, kMaxDims> idx{};
    const uint8_t* base = static_cast<const uint8_t*>(data());
    uint8_t* dst = static_cast<uint8_t*>(out.data());
    int64_t n = numel();
    for (int64_t lin = 0; lin < n; ++lin) {
        int64_t off = 0;
        for (int i = 0; i < rank(); ++i)
            off += idx[static_cast<size_t>(i)] * strides_[static_cast<size_t>(i)];
        std::memcpy(dst + static_cast<size_t>(lin) * es, base + static_cast<size_t>(off) * es, es);
        for (int i = rank() - 1; i >= 0; --i) {
            if (++idx[static_cast<size_t>(i)] < shape_[i]) break;
            idx[static_cast<size_t>(i)] = 0;
        }
    }
    return out;
}

Result<Tensor> Tensor::to(Device target, void* stream) const {
    if (!defined()) return invalid_argument("to(): undefined tensor");
    Tensor src = *this;
    if (!src.is_contiguous()) {
        if (!device().is_cpu()) return invalid_argument("to(): non-contiguous device tensor " + describe());
        H3_ASSIGN_OR_RETURN(src, contiguous());
    }
    H3_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(shape_, dtype_, target));
    H3_TRY(out.copy_from(src, stream));
    return out;
}

Status Tensor::copy_from(const Tensor& src, void* stream) {
    if (!(src.shape() == shape_) || src.dtype() != dtype_)
        return invalid_argument("copy_from: " + src.describe() + " into " + describe());
    if (!src.is_contiguous() || !is_contiguous())
        return invalid_argument("copy_from needs contiguous tensors: " + src.describe() + " -> " +
                                describe());
    if (read_only()) return invalid_argument("copy_from into a read-only tensor " + describe());
    size_t n = nbytes();
    if (n == 0) return ok_status();
    bool sh = src.device().is_cpu(), dh = device().is_cpu();
    if (sh && dh) {
        std::memcpy(data(), src.data(), n);
        return ok_status();
    }
    cuda::CopyKind kind = sh ? cuda::CopyKind::kHostToDevice
                             : (dh ? cuda::CopyKind::kDeviceToHost : cuda::CopyKind::kDeviceToDevice);
    return cuda::memcpy(data(), src.data(), n, kind, stream);
}

Result<Tensor> Tensor::to_dtype(DType target) const {
    if (!device().is_cpu()) return invalid_argument("to_dtype() is host-only, got " + describe());
    H3_ASSIGN_OR_RETURN(Tensor src, contiguous());
    Tensor out = Tensor::host(shape_, target);
    convert_array(src.data(), dtype_, out.data(), target, static_cast<size_t>(numel()));
    return out;
}

double Tensor::get(std::initializer_list<int64_t> index) const {
    H3_CHECK(device().is_cpu(), "get() on " << describe());
    H3_CHECK(static_cast<int>(index.size()) == rank(), "get() index rank");
    int64_t off = 0;
    int i = 0;
    for (int64_t v : index) {
        H3_CHECK(v >= 0 && v < shape_[i], "get() index " << v << " out of range for dim " << i);
        off += v * strides_[static_cast<size_t>(i++)];
    }
    return load_as_f64(data(), dtype_, static_cast<size_t>(off));
}

void Tensor::set(std::initializer_list<int64_t> index, double v) {
    H3_CHECK(device().is_cpu() && !read_only(), "set() on " << describe());
    H3_CHECK(static_cast<int>(index.size()) == rank(), "set() index rank");
    int64_t off = 0;
    int i = 0;
    for (int64_t x : index) {
        H3_CHECK(x >= 0 && x < shape_[i], "set() index " << x << " out of range for dim " << i);
        off += x * strides_[static_cast<size_t>(i++)];
    }
    store_from_f64(data(), dtype_, static_cast<size_t>(off), v);
}

std::string Tensor::describe() const {
    if (!defined()) return "<undefined tensor>";
    return std::string(dtype_name(dtype_)) + shape_.to_string() + " " + device().to_string();
}

Result<std::vector<float>> to_f32_vector(const Tensor& t) {
    Tensor host = t;
    if (!t.device().is_cpu()) {
        H3_ASSIGN_OR_RETURN(host, t.to(Device::cpu()));
    }
    H3_ASSIGN_OR_RETURN(Tensor c, host.contiguous());
    std::vector<float> out(static_cast<size_t>(c.numel()));
    convert_array(c.data(), c.dtype(), out.data(), DType::kF32, out.size());
    return out;
}

Tensor host_tensor_from(const std::vector<float>& values, const Shape& shape, DType dtype) {
    H3_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
             "host_tensor_from: " << values.size() << " values for shape " << shape.to_string());
    Tensor t = Tensor::host(shape, dtype);
    convert_array(values.data(), DType::kF32, t.data(), dtype, values.size());
    return t;
}

} // namespace h3
