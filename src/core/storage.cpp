#include "core/storage.h"

#include "core/one_time_work.h"

#include "core/cuda_api.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace h3 {

namespace {

class HostStorage final : public Storage {
public:
    HostStorage(void* p, size_t n) {
        data_ = p;
        bytes_ = n;
    }
    ~HostStorage() override { std::free(data_); }
};

class PinnedStorage final : public Storage {
public:
    PinnedStorage(void* p, size_t n) {
        data_ = p;
        bytes_ = n;
        pinned_ = true;
    }
    ~PinnedStorage() override { cuda::free_pinned(data_); }
};

std::atomic<size_t> g_device_current{0};
std::atomic<size_t> g_device_peak{0};
std::atomic<uint64_t> g_device_allocations{0};

class DeviceStorage final : public Storage {
public:
    DeviceStorage(void* p, size_t n, Device d) {
        data_ = p;
        bytes_ = n;
        device_ = d;
        size_t now = g_device_current.fetch_add(n) + n;
        size_t peak = g_device_peak.load();
        while (now > peak && !g_device_peak.compare_exchange_weak(peak, now)) {
        }
    }
    ~DeviceStorage() override {
        cuda::free_device(data_, device_.index);
        g_device_current.fetch_sub(bytes_);
    }
};

class MappedStorage final : public Storage {
public:
    MappedStorage(std::shared_ptr<MappedFile> f, size_t off, size_t n) : file_(std::move(f)) {
        data_ = const_cast<uint8_t*>(file_->data()) + off;
        bytes_ = n;
        read_only_ = true;
    }

private:
    std::shared_ptr<MappedFile> file_;
};

} // namespace

DeviceMemoryStats device_memory_stats() {
    return {g_device_current.load(), g_device_peak.load(), g_device_allocations.load()};
}
void reset_device_memory_peak() {
    g_device_peak.store(g_device_current.load());
}

namespace {

Result<std::shared_ptr<Storage>> host_storage(size_t bytes, bool zero) {
    const size_t align = bytes >= kHugeHostBytes ? size_t{2} << 20 : 64;
    size_t rounded = (bytes + align - 1) / align * align;
    if (rounded == 0) rounded = align;
    void* p = std::aligned_alloc(align, rounded);
    if (!p) return out_of_memory("host allocation of " + std::to_string(bytes) + " bytes failed");
#ifdef MADV_HUGEPAGE
    if (align > 64) (void)madvise(p, rounded, MADV_HUGEPAGE); // advice only: THP may be off
#endif
    if (zero) std::memset(p, 0, rounded);
    return std::shared_ptr<Storage>(std::make_shared<HostStorage>(p, bytes));
}

} // namespace

Result<std::shared_ptr<Storage>> allocate_host(size_t bytes) {
    AllocationTally::count_allocation(bytes);
    return host_storage(bytes, true);
}

Result<std::shared_ptr<Storage>> allocate_host_uninitialized(size_t bytes) {
    AllocationTally::count_allocation(bytes);
    return host_storage(bytes, false);
}

Result<std::shared_ptr<Storage>> allocate_pinned(size_t bytes) {
    H3_ASSIGN_OR_RETURN(void* p, cuda::malloc_pinned(bytes));
    AllocationTally::count_allocation(bytes);
    return std::shared_ptr<Storage>(std::make_shared<PinnedStorage>(p, bytes));
}

namespace {
thread_local std::string t_allocation_fence; // non-empty: why device allocations are refused on this thread
} // namespace

DeviceAllocationFence::DeviceAllocationFence(std::string why) : previous_(std::move(t_allocation_fence)) {
    t_allocation_fence = why.empty() ? std::string("refused") : std::move(why);
}

DeviceAllocationFence::~DeviceAllocationFence() {
    t_allocation_fence = std::move(previous_);
}

Result<std::shared_ptr<Storage>> allocate_device(size_t bytes, Device device) {
    if (!t_allocation_fence.empty())
        return invalid_argument("device allocation of " + std::to_string(bytes) + " bytes on " +
                                device.to_string() + " refused: " + t_allocation_fence);
    H3_ASSIGN_OR_RETURN(void* p, cuda::malloc_device(bytes, device.index));
    g_device_allocations.fetch_add(1);
    AllocationTally::count_allocation(bytes);
    return std::shared_ptr<Storage>(std::make_shared<DeviceStorage>(p, bytes, device));
}

Result<std::shared_ptr<Storage>> allocate(size_t bytes, Device device) {
    return device.is_cpu() ? allocate_host(bytes) : allocate_device(bytes, device);
}

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT) return not_found("file " + path + " does not exist");
        return io_error("cannot open " + path + ": " + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return io_error("cannot stat " + path + ": " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) { // a device (/dev/zero), a FIFO, a socket: never read as a file
        ::close(fd);
        return bad_input(path + " is not a regular file");
    }
    std::shared_ptr<MappedFile> f(new MappedFile());
    f->path_ = path;
    f->size_ = static_cast<size_t>(st.st_size);
    if (f->size_ > 0) {
        void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            ::close(fd);
            return io_error("cannot mmap " + path + ": " + std::strerror(err));
        }
        f->data_ = p;
    }
    ::close(fd);
    return f;
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(data_, size_);
}

std::shared_ptr<Storage> map_view(std::shared_ptr<MappedFile> file, size_t offset, size_t bytes) {
    return std::make_shared<MappedStorage>(std::move(file), offset, bytes);
}

} // namespace h3
