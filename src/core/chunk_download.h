// Chunks produced on a device stream, downloaded through two page-locked buffers and handed to a consumer
// in order, without the producer waiting for its own work (the streamed video decode's frames, issue #45):
//
//   ChunkDownload dl(std::move(transfer), sink);
//   for each chunk k: H3_ASSIGN_OR_RETURN(Tensor buf, dl.next(shape, dtype));   // slot k % 2's buffer
//                     queue the work writing `buf` on the producer's stream;
//                     H3_TRY(dl.commit());   // chunk k's copy queued, chunk k−1 handed over
//   H3_TRY(dl.finish());                     // the last chunk handed over
//
// commit() queues chunk k's copy behind the producer's work (on its own copy stream, ordered by an event),
// then waits for chunk k−1's copy only — queued one chunk earlier, it ran while the device went on with
// what the producer queued after it — and hands chunk k−1 to the sink as a new host tensor. So the copy of
// chunk k overlaps the production of chunk k+1, the host never waits for the producer's stream, and at
// most two chunks are held (bounded memory: two device and two host buffers). A slot is written again only
// after its chunk was handed over. With a synchronous transfer (the CPU) each chunk is handed over at its
// own commit. The sink's error ends the download with it. The destructor waits for copies in flight.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <functional>
#include <memory>

namespace h3 {

// How a slot's bytes reach the host. The device form (make_chunk_transfer) uses device buffers, a copy
// stream, events and page-locked host buffers; tests use stand-ins.
class ChunkTransfer {
public:
    virtual ~ChunkTransfer() = default;
    // Where the producer writes chunk bytes for `slot` (0 or 1): a contiguous tensor of `shape` and `dtype`.
    virtual Result<Tensor> buffer(int slot, const Shape& shape, DType dtype) = 0;
    // Queues the copy of the slot's first `bytes` to its host buffer after the work queued so far on the
    // producer's stream. No host wait.
    virtual Status queue_copy(int slot, size_t bytes) = 0;
    // The host waits for the slot's queued copy; then host_bytes(slot) holds the chunk.
    virtual Status wait(int slot) = 0;
    virtual const void* host_bytes(int slot) const = 0;
    // true: the bytes are on the host once the producer returns (nothing to overlap).
    virtual bool synchronous() const = 0;
};

// For chunks produced on `stream` (a cudaStream_t; unused on the CPU) on `device`, of at most `slot_bytes`
// each (buffers grow if a chunk is larger). On the CPU the producer writes host buffers (synchronous). Where
// page-locked memory cannot be had the host buffers are pageable (the copy is then staged by the driver).
Result<std::unique_ptr<ChunkTransfer>> make_chunk_transfer(Device device, void* stream, size_t slot_bytes);

class ChunkDownload {
public:
    using Sink = std::function<Status(Tensor)>; // host tensor it may keep, chunks in order
    ChunkDownload(std::unique_ptr<ChunkTransfer> transfer, Sink sink);
    ~ChunkDownload();
    ChunkDownload(const ChunkDownload&) = delete;
    ChunkDownload& operator=(const ChunkDownload&) = delete;

    // The buffer of the next chunk (contiguous, `shape`, `dtype`). Once per commit().
    Result<Tensor> next(const Shape& shape, DType dtype);
    // Queues the chunk's copy, then hands over the one before it (see above).
    Status commit();
    // Hands over the chunk still held. No next() after it.
    Status finish();
    int64_t chunks_delivered() const { return delivered_; }

private:
    Status deliver(int slot);

    std::unique_ptr<ChunkTransfer> transfer_;
    Sink sink_;
    struct Slot {
        Shape shape;
        DType dtype = DType::kU8;
        int64_t index = 0;   // the chunk's place in the sequence
        bool queued = false; // its copy is queued and the chunk not yet handed over
    };
    Slot slots_[2];
    int current_ = -1; // the slot next() handed out, until commit()
    int64_t index_ = 0, delivered_ = 0;
    bool failed_ = false;
};

} // namespace h3
