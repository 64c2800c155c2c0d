// The few CUDA runtime calls core needs, behind a plain C++ interface so that core compiles without CUDA.
// In a CPU-only build every call returns an error saying CUDA is not built in.
#pragma once

#include "core/status.h"

#include <cstddef>
#include <cstdint>

namespace h3::cuda {

bool built_with_cuda();
// Number of visible devices (0 in a CPU-only build or without a driver).
int device_count();
Status set_device(int index);

Result<void*> malloc_device(size_t bytes, int device);
void free_device(void* ptr, int device);
Result<void*> malloc_pinned(size_t bytes);
void free_pinned(void* ptr);

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost };
// stream == nullptr: synchronous copy between two device-wide synchronizes (it sees all earlier work on
// every stream, and has landed when it returns, pageable sources included). Otherwise asynchronous on that
// cudaStream_t. memset_device likewise.
Status memcpy(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream = nullptr);
Status memset_device(void* dst, int value, size_t bytes, void* stream = nullptr);

Result<void*> stream_create();
void stream_destroy(void* stream);
Status stream_synchronize(void* stream);
Status device_synchronize();

// Events (cudaEvent_t behind void*): ordering marks on a stream that the host can wait for or time without
// synchronizing the whole device.
Result<void*> event_create();
void event_destroy(void* event);
Status event_record(void* event, void* stream);
// Work queued on `stream` after this call waits for `event` (no host-side wait).
Status stream_wait_event(void* stream, void* event);
Status event_synchronize(void* event);
// Milliseconds between two recorded events (both complete).
Result<float> event_elapsed_ms(void* start, void* end);

// Page-locks existing host memory [ptr, ptr + bytes) (cudaHostRegister; `read_only` for a read-only file
// mapping, which then stays shared with the page cache). Fails in a CPU-only build.
Status host_register(void* ptr, size_t bytes, bool read_only);
void host_unregister(void* ptr);

struct MemoryInfo {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
};
Result<MemoryInfo> memory_info(int device);

} // namespace h3::cuda

namespace h3 {
// Bytes held in device buffers made through allocate_device (current and the high-water mark since the
// last reset), summed over devices. Benches report the peak.
struct DeviceMemoryStats {
    size_t current = 0;
    size_t peak = 0;
    uint64_t allocations = 0; // allocate_device calls since the process started (benches count per forward)
};
DeviceMemoryStats device_memory_stats();
void reset_device_memory_peak();

// A CUDA event owned by its holder (RAII); `create` fails in a CPU-only build.
class CudaEvent {
public:
    static Result<CudaEvent> create();
    CudaEvent() = default;
    ~CudaEvent() { cuda::event_destroy(event_); }
    CudaEvent(CudaEvent&& o) noexcept : event_(o.event_) { o.event_ = nullptr; }
    CudaEvent& operator=(CudaEvent&& o) noexcept;
    CudaEvent(const CudaEvent&) = delete;
    CudaEvent& operator=(const CudaEvent&) = delete;
    bool valid() const { return event_ != nullptr; }
    void* get() const { return event_; }
    Status record(void* stream) { return cuda::event_record(event_, stream); }
    Status synchronize() const { return cuda::event_synchronize(event_); }

private:
    void* event_ = nullptr;
};
} // namespace h3
