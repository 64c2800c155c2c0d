// The few CUDA runtime calls core needs, behind a plain C++ interface so that core compiles without CUDA.
// In a CPU-only build every call returns an error saying CUDA is not built in.
#pragma once

#include "core/status.h"

#include <cstddef>

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
// stream == nullptr: synchronous copy after a device-wide synchronize (it sees all earlier work on every
// stream). Otherwise asynchronous on that cudaStream_t.
Status memcpy(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream = nullptr);
Status memset_device(void* dst, int value, size_t bytes, void* stream = nullptr);

Result<void*> stream_create();
void stream_destroy(void* stream);
Status stream_synchronize(void* stream);
Status device_synchronize();

// Events and stream ordering (uploads on a stream of their own, ordered against the ops' stream). Events are
// created without timing.
Result<void*> event_create();
void event_destroy(void* event);
Status event_record(void* event, void* stream);
// Work queued on `stream` after this call waits for `event` (no host-side wait).
Status stream_wait_event(void* stream, void* event);
Status event_synchronize(void* event);

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
};
DeviceMemoryStats device_memory_stats();
void reset_device_memory_peak();
} // namespace h3
