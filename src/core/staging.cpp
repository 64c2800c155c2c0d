#include "core/staging.h"

#include "core/one_time_work.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

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
    note_workspace_allocation(pinned_->bytes());
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

void parallel_memcpy(void* dst, const void* src, size_t bytes) {
    constexpr size_t kMinPerThread = size_t{8} << 20;
    const size_t hw = std::max(1u, std::thread::hardware_concurrency());
    const size_t n = std::min<size_t>({4, hw, std::max<size_t>(1, bytes / kMinPerThread)});
    if (n <= 1) {
        std::memcpy(dst, src, bytes);
        return;
    }
    const size_t part = (bytes + n - 1) / n;
    std::vector<std::thread> threads;
    for (size_t i = 1; i < n; ++i) {
        const size_t off = i * part;
        if (off >= bytes) break;
        threads.emplace_back([=] {
            std::memcpy(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off,
                        std::min(part, bytes - off));
        });
    }
    std::memcpy(dst, src, std::min(part, bytes));
    for (auto& t : threads) t.join();
}

namespace {

// Page-locked chunks kept between download_chunked calls: pinning and unpinning two 64 MiB chunks per call
// (cudaHostAlloc locks page by page) is a large part of downloading a decoded video's 0.37 GB of frames.
// At most kKept chunks are kept (process-wide, 128 MiB at the default chunk size).
class KeptChunks {
public:
    // A kept chunk of at least `bytes`, else a new one (an error where page-locked memory cannot be had).
    static Result<std::shared_ptr<Storage>> take(size_t bytes) {
        {
            std::lock_guard<std::mutex> lock(mutex());
            auto& kept = chunks();
            for (auto it = kept.begin(); it != kept.end(); ++it)
                if ((*it)->bytes() >= bytes) {
                    std::shared_ptr<Storage> s = std::move(*it);
                    kept.erase(it);
                    return s;
                }
        }
        return allocate_pinned(bytes);
    }
    // Keeps `s` for the next call (no transfer may still write it). With kKept kept, it replaces the
    // smallest when larger (small chunks, e.g. a test's, must not hold the places of the default size), else
    // it is freed.
    static void give_back(std::shared_ptr<Storage> s) {
        if (!s) return;
        std::lock_guard<std::mutex> lock(mutex());
        auto& kept = chunks();
        if (kept.size() < kKept) {
            kept.push_back(std::move(s));
            return;
        }
        auto smallest = std::min_element(
            kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a->bytes() < b->bytes(); });
        if ((*smallest)->bytes() < s->bytes()) *smallest = std::move(s);
    }

private:
    static constexpr size_t kKept = 2;
    static std::mutex& mutex() {
        static std::mutex m;
        return m;
    }
    static std::vector<std::shared_ptr<Storage>>& chunks() {
        // never destroyed: freeing page-locked memory after the CUDA runtime has shut down at exit fails
        static auto* c = new std::vector<std::shared_ptr<Storage>>();
        return *c;
    }
};

} // namespace

Result<std::shared_ptr<Storage>> take_pinned_chunk(size_t bytes) {
    return KeptChunks::take(bytes);
}

void keep_pinned_chunk(std::shared_ptr<Storage> chunk) {
    KeptChunks::give_back(std::move(chunk));
}

Result<Tensor> download_chunked(const Tensor& src, void* stream, size_t chunk_bytes) {
    if (src.device().is_cpu()) return src.to(Device::cpu());
    if (!src.is_contiguous()) return invalid_argument("download_chunked: " + src.describe() + " is strided");
    const size_t bytes = src.nbytes();
    chunk_bytes = std::max<size_t>(chunk_bytes, 1);
    if (bytes <= chunk_bytes) { // one chunk: the staging buffer's path
        StagingBuffer one;
        return one.download(src, stream);
    }
    struct Slot {
        std::shared_ptr<Storage> pinned;
        CudaEvent done;
        size_t offset = 0, size = 0;
        ~Slot() { // on every path: no transfer into the chunk is left in flight when it is kept
            if (size > 0) (void)done.synchronize();
            KeptChunks::give_back(std::move(pinned));
        }
    };
    Slot slots[2];
    for (Slot& s : slots) {
        auto p = KeptChunks::take(chunk_bytes);
        if (!p.ok()) return src.to(Device::cpu(), stream); // no page-locked memory: the plain download
        s.pinned = std::move(p).value();
        H3_ASSIGN_OR_RETURN(s.done, CudaEvent::create());
    }
    // Every byte of `out` is written by the chunk copies below (in parallel, which also spreads its
    // first-touch page faults over the copy threads): no zero fill first.
    H3_ASSIGN_OR_RETURN(std::shared_ptr<Storage> out_storage, allocate_host_uninitialized(bytes));
    Tensor out = Tensor::from_storage(std::move(out_storage), 0, src.shape(), src.dtype());
    const char* from = static_cast<const char*>(src.data());
    char* to = static_cast<char*>(out.data());
    auto queue = [&](Slot& s, size_t offset) -> Status {
        s.offset = offset;
        s.size = std::min(chunk_bytes, bytes - offset);
        H3_TRY(cuda::memcpy(s.pinned->data(), from + offset, s.size, cuda::CopyKind::kDeviceToHost, stream));
        return s.done.record(stream);
    };
    size_t next = 0;
    for (Slot& s : slots)
        if (next < bytes) {
            H3_TRY(queue(s, next));
            next += s.size;
        }
    for (size_t i = 0;; i ^= 1) {
        Slot& s = slots[i];
        if (s.size == 0) break;
        H3_TRY(s.done.synchronize());
        parallel_memcpy(to + s.offset, s.pinned->data(), s.size);
        s.size = 0;
        if (next < bytes) { // refill this slot while the host copies the other one out
            H3_TRY(queue(s, next));
            next += s.size;
        }
    }
    return out;
}

} // namespace h3
