// Owned memory blocks: aligned host, pinned host, device, and read-only views into a memory-mapped file.
#pragma once

#include "core/device.h"
#include "core/status.h"

#include <cstddef>
#include <memory>
#include <string>

namespace h3 {

class Storage {
public:
    virtual ~Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    void* data() const { return data_; }
    size_t bytes() const { return bytes_; }
    Device device() const { return device_; }
    bool read_only() const { return read_only_; }
    bool pinned() const { return pinned_; }

protected:
    Storage() = default;
    void* data_ = nullptr;
    size_t bytes_ = 0;
    Device device_;
    bool read_only_ = false;
    bool pinned_ = false;
};

// Host memory aligned to 64 bytes, zero-initialised. Allocations of kHugeHostBytes or more are aligned to 2
// MiB and advised as transparent huge pages (Linux), so first touching them faults 512× fewer pages.
inline constexpr size_t kHugeHostBytes = size_t{32} << 20;
Result<std::shared_ptr<Storage>> allocate_host(size_t bytes);
// The same without the zero fill, for a buffer the caller overwrites entirely before anyone reads it (a
// download's destination): its pages are first touched by that write.
Result<std::shared_ptr<Storage>> allocate_host_uninitialized(size_t bytes);
// Page-locked host memory (CUDA builds only).
Result<std::shared_ptr<Storage>> allocate_pinned(size_t bytes);
// Device memory on cuda:N (CUDA builds only). Not initialised.
Result<std::shared_ptr<Storage>> allocate_device(size_t bytes, Device device);
// While one is alive on a thread, allocate_device on that thread fails (ops/graph.h: recorded work must not
// own device buffers, which would be freed while the recording still points at them). Nests.
class DeviceAllocationFence {
public:
    explicit DeviceAllocationFence(std::string why);
    ~DeviceAllocationFence();
    DeviceAllocationFence(const DeviceAllocationFence&) = delete;
    DeviceAllocationFence& operator=(const DeviceAllocationFence&) = delete;

private:
    std::string previous_;
};
Result<std::shared_ptr<Storage>> allocate(size_t bytes, Device device);

// A read-only memory-mapped file. Views into it keep it alive.
class MappedFile {
public:
    static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    MappedFile() = default;
    void* data_ = nullptr;
    size_t size_ = 0;
    std::string path_;
};

// A read-only storage over [offset, offset+bytes) of a mapped file; the caller checked the range.
std::shared_ptr<Storage> map_view(std::shared_ptr<MappedFile> file, size_t offset, size_t bytes);

} // namespace h3
