#include "core/chunk_download.h"

#include "core/cuda_api.h"
#include "core/device_stream.h"
#include "core/staging.h"
#include "core/storage.h"

#include <algorithm>
#include <cstring>

namespace h3 {

namespace {

size_t tensor_bytes(const Shape& shape, DType dtype) {
    return static_cast<size_t>(shape.numel()) * dtype_size(dtype);
}

// The CPU: the producer writes the host buffers themselves.
class HostChunkTransfer final : public ChunkTransfer {
public:
    explicit HostChunkTransfer(size_t slot_bytes) : slot_bytes_(slot_bytes) {}
    Result<Tensor> buffer(int slot, const Shape& shape, DType dtype) override {
        const size_t bytes = tensor_bytes(shape, dtype);
        auto& b = buffers_[slot];
        if (!b || b->bytes() < bytes) {
            H3_ASSIGN_OR_RETURN(b, allocate_host_uninitialized(std::max(bytes, slot_bytes_)));
        }
        return Tensor::from_storage(b, 0, shape, dtype);
    }
    Status queue_copy(int, size_t) override { return ok_status(); }
    Status wait(int) override { return ok_status(); }
    const void* host_bytes(int slot) const override { return buffers_[slot]->data(); }
    bool synchronous() const override { return true; }

private:
    size_t slot_bytes_;
    std::shared_ptr<Storage> buffers_[2];
};

// A device: device buffers the producer writes on its stream; per slot an event after the producer's work,
// which a copy stream of its own waits for before copying into the slot's page-locked host buffer, and an
// event after the copy, which the host waits for.
class DeviceChunkTransfer final : public ChunkTransfer {
public:
    static Result<std::unique_ptr<ChunkTransfer>> create(Device device, void* stream, size_t slot_bytes) {
        std::unique_ptr<DeviceChunkTransfer> t(new DeviceChunkTransfer(device, stream, slot_bytes));
        H3_ASSIGN_OR_RETURN(t->copy_, DeviceStream::create(device));
        for (int s = 0; s < 2; ++s) {
            H3_ASSIGN_OR_RETURN(t->produced_[s], DeviceEvent::create(device));
            H3_ASSIGN_OR_RETURN(t->copied_[s], DeviceEvent::create(device));
        }
        return std::unique_ptr<ChunkTransfer>(std::move(t));
    }
    ~DeviceChunkTransfer() override {
        (void)copy_.synchronize(); // no copy may still write a host buffer given back below
        for (auto& h : host_)
            if (h && h->pinned()) keep_pinned_chunk(std::move(h));
    }
    Result<Tensor> buffer(int slot, const Shape& shape, DType dtype) override {
        const size_t bytes = tensor_bytes(shape, dtype), want = std::max(bytes, slot_bytes_);
        auto& d = dev_[slot];
        if (!d || d->bytes() < bytes) {
            d.reset(); // the slot's last copy has landed (ChunkDownload waits before reusing a slot)
            H3_ASSIGN_OR_RETURN(d, allocate_device(want, device_));
        }
        auto& h = host_[slot];
        if (!h || h->bytes() < bytes) {
            if (h && h->pinned()) keep_pinned_chunk(std::move(h));
            auto pinned = take_pinned_chunk(want);
            if (pinned.ok()) {
                h = std::move(pinned).value();
            } else { // no page-locked memory: a pageable buffer (the driver stages the copy)
                H3_ASSIGN_OR_RETURN(h, allocate_host_uninitialized(want));
            }
        }
        return Tensor::from_storage(d, 0, shape, dtype);
    }
    Status queue_copy(int slot, size_t bytes) override {
        H3_TRY(produced_[slot].record(stream_));
        H3_TRY(produced_[slot].make_wait(copy_.handle()));
        H3_TRY(cuda::memcpy(host_[slot]->data(), dev_[slot]->data(), bytes, cuda::CopyKind::kDeviceToHost,
                            copy_.handle()));
        return copied_[slot].record(copy_.handle());
    }
    Status wait(int slot) override { return copied_[slot].synchronize(); }
    const void* host_bytes(int slot) const override { return host_[slot]->data(); }
    bool synchronous() const override { return false; }

private:
    DeviceChunkTransfer(Device device, void* stream, size_t slot_bytes)
        : device_(device), stream_(stream), slot_bytes_(slot_bytes) {}
    Device device_;
    void* stream_;
    size_t slot_bytes_;
    DeviceStream copy_;
    DeviceEvent produced_[2], copied_[2];
    std::shared_ptr<Storage> dev_[2], host_[2];
};

} // namespace

Result<std::unique_ptr<ChunkTransfer>> make_chunk_transfer(Device device, void* stream, size_t slot_bytes) {
    if (device.is_cpu())
        return std::unique_ptr<ChunkTransfer>(std::make_unique<HostChunkTransfer>(slot_bytes));
    return DeviceChunkTransfer::create(device, stream, slot_bytes);
}

ChunkDownload::ChunkDownload(std::unique_ptr<ChunkTransfer> transfer, Sink sink)
    : transfer_(std::move(transfer)), sink_(std::move(sink)) {}

ChunkDownload::~ChunkDownload() {
    for (int s = 0; s < 2; ++s)
        if (slots_[s].queued) (void)transfer_->wait(s); // its copy still writes the host buffer
}

Result<Tensor> ChunkDownload::next(const Shape& shape, DType dtype) {
    if (failed_) return internal_error("ChunkDownload: next() after an error");
    if (current_ >= 0) return internal_error("ChunkDownload: next() twice without commit()");
    const int s = static_cast<int>(index_ % 2);
    if (slots_[s].queued) H3_TRY(deliver(s)); // its chunk is two back: hand it over before reuse
    auto buf = transfer_->buffer(s, shape, dtype);
    if (!buf.ok()) {
        failed_ = true;
        return buf.status();
    }
    slots_[s].shape = shape;
    slots_[s].dtype = dtype;
    slots_[s].index = index_;
    current_ = s;
    return buf;
}

Status ChunkDownload::commit() {
    if (current_ < 0) return internal_error("ChunkDownload: commit() without next()");
    const int s = current_;
    current_ = -1;
    ++index_;
    if (Status st = transfer_->queue_copy(s, tensor_bytes(slots_[s].shape, slots_[s].dtype)); !st.ok()) {
        failed_ = true;
        return st;
    }
    slots_[s].queued = true;
    if (transfer_->synchronous()) return deliver(s);
    const int other = 1 - s;
    return slots_[other].queued ? deliver(other) : ok_status();
}

Status ChunkDownload::finish() {
    if (current_ >= 0) return internal_error("ChunkDownload: finish() with a chunk not committed");
    // the older first (at most one is held, but keep the order if both are)
    int order[2] = {0, 1};
    if (slots_[1].queued && slots_[0].queued && slots_[1].index < slots_[0].index)
        std::swap(order[0], order[1]);
    for (int s : order)
        if (slots_[s].queued) H3_TRY(deliver(s));
    return ok_status();
}

Status ChunkDownload::deliver(int s) {
    Slot& slot = slots_[s];
    slot.queued = false;
    Status st = transfer_->wait(s);
    Tensor host;
    if (st.ok()) {
        const size_t bytes = tensor_bytes(slot.shape, slot.dtype);
        auto storage = allocate_host_uninitialized(bytes);
        if (storage.ok()) {
            host = Tensor::from_storage(std::move(storage).value(), 0, slot.shape, slot.dtype);
            parallel_memcpy(host.data(), transfer_->host_bytes(s), bytes); // the sink keeps it
            ++delivered_;
            st = sink_(std::move(host));
        } else {
            st = storage.status();
        }
    }
    if (!st.ok()) failed_ = true;
    return st;
}

} // namespace h3
