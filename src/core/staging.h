// Host <-> device copies that never synchronize the whole device. An upload copies the host bytes into a
// reusable page-locked buffer and queues the transfer on the stream; the buffer is rewritten only after the
// event of its previous transfer has passed (normally long ago), so the host does not wait for the stream. A
// download queues the transfer into the buffer and waits for that stream only. When either side is the
// host, or page-locked memory cannot be had, the copies are plain stream-ordered ones.
#pragma once

#include "core/cuda_api.h"
#include "core/storage.h"
#include "core/tensor.h"

#include <memory>

namespace h3 {

class StagingBuffer {
public:
    StagingBuffer() = default;
    ~StagingBuffer();
    StagingBuffer(const StagingBuffer&) = delete;
    StagingBuffer& operator=(const StagingBuffer&) = delete;

    // `bytes` host bytes into `dst` (device or host memory of at least `bytes`), ordered on `stream`.
    Status upload(const void* src, size_t bytes, void* dst, Device dst_device, void* stream);
    // A contiguous host tensor into `dst` (same shape and dtype, contiguous, any device).
    Status upload(const Tensor& host, Tensor& dst, void* stream);
    // A contiguous tensor (any device) into a new host tensor; waits for `stream` only.
    Result<Tensor> download(const Tensor& src, void* stream);
    // Waits for the last queued upload out of the buffer (before the buffer or its sources go away).
    Status wait();

private:
    Status reserve(size_t bytes);
    std::shared_ptr<Storage> pinned_;
    CudaEvent done_;
    bool pending_ = false;
};

// A contiguous tensor (any device) into a new host tensor through two page-locked chunks of `chunk_bytes`,
// double-buffered: the copy engine fills one chunk while host threads copy the other out. Waits for `stream`
// only. For large results (the decoded video, ~1.5 GB at 1344×768×124 in fp32) a plain download from device
// to pageable memory runs at the driver's staging rate (~1.5 GB/s measured on the H200); this runs near the
// pinned link rate plus the host copy. Falls back to the plain download where page-locked memory cannot be
// had; host tensors are copied.
Result<Tensor> download_chunked(const Tensor& src, void* stream, size_t chunk_bytes = size_t{64} << 20);

// The page-locked chunks download_chunked keeps between calls (two at most, process-wide), for other
// double-buffered downloads (core/chunk_download.h): a kept chunk of at least `bytes`, else a new one (an
// error where page-locked memory cannot be had); and a chunk given back for the next user (no transfer may
// still write it).
Result<std::shared_ptr<Storage>> take_pinned_chunk(size_t bytes);
void keep_pinned_chunk(std::shared_ptr<Storage> chunk);

// memcpy split over up to 4 threads for large copies (first-touch page faults of a fresh destination
// dominate a single-thread copy of tens of MB).
void parallel_memcpy(void* dst, const void* src, size_t bytes);

} // namespace h3
