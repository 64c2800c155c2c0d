#include "core/staging.h"

#include <cstring>

namespace h3 {

Result<CudaEvent> CudaEvent::create() {
    CudaEvent e;
    H3_ASSIGN_OR_RETURN(e.event_, cuda::event_create());
    return e;
}

CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
    if (this != &o) {
        cuda::event_destroy(event_);
        event_ = o.event_;
        o.event_ = nullptr;
    }
    return *this;
}

StagingBuffer::~StagingBuffer() {
    (void)wait(); // the queued transfer still reads the buffer
}

Status StagingBuffer::wait() {
    if (!pending_) return ok_status();
    pending_ = false;
    return done_.synchronize();
}

Status StagingBuffer::reserve(size_t bytes) {
    if (pinned_ && pinned_->bytes() >= bytes) return wait();
    H3_TRY(wait());
    pinned_.reset();
    auto p = allocate_pinned(bytes + bytes / 4); // headroom for slowly growing sizes
    if (!p.ok()) return p.status();
    pinned_ = std::move(p).value();
    if (!done_.valid()) {
        H3_ASSIGN_OR_RETURN(done_, CudaEvent::create());
    }
    return ok_status();
}

Status StagingBuffer::upload(const void* src, size_t bytes, void* dst, Device dst_device, void* stream) {
    if (bytes == 0) return ok_status();
    if (dst_device.is_cpu()) {
        std::memcpy(dst, src, bytes);
        return ok_status();
    }
    if (!reserve(bytes).ok()) // no page-locked memory: a pageable copy (staged by the driver)
        return cuda::memcpy(dst, src, bytes, cuda::CopyKind::kHostToDevice, stream);
    std::memcpy(pinned_->data(), src, bytes);
    H3_TRY(cuda::memcpy(dst, pinned_->data(), bytes, cuda::CopyKind::kHostToDevice, stream));
    H3_TRY(done_.record(stream));
    pending_ = true;
    return ok_status();
}

Status StagingBuffer::upload(const Tensor& host, Tensor& dst, void* stream) {
    if (!host.device().is_cpu() || !host.is_contiguous() || !dst.is_contiguous() ||
        !(host.shape() == dst.shape()) || host.dtype() != dst.dtype())
        return invalid_argument("StagingBuffer::upload: " + host.describe() + " into " + dst.describe() +
                                " (a contiguous host tensor into one of the same shape and dtype)");
    return upload(host.data(), host.nbytes(), dst.data(), dst.device(), stream);
}

Result<Tensor> StagingBuffer::download(const Tensor& src, void* stream) {
    if (src.device().is_cpu()) return src.to(Device::cpu());
    if (!src.is_contiguous()) return invalid_argument("StagingBuffer::download: " + src.describe());
    const size_t bytes = src.nbytes();
    if (bytes == 0 || !reserve(bytes).ok()) return src.to(Device::cpu(), stream);
    H3_TRY(cuda::memcpy(pinned_->data(), src.data(), bytes, cuda::CopyKind::kDeviceToHost, stream));
    H3_TRY(cuda::stream_synchronize(stream));
    Tensor out = Tensor::host(src.shape(), src.dtype());
    std::memcpy(out.data(), pinned_->data(), bytes);
    return out;
}

} // namespace h3
