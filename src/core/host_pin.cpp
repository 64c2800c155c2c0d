#include "core/host_pin.h"

#include "core/cuda_api.h"

#include <algorithm>
#include <cstdint>
#include <unistd.h>

namespace h3 {

std::vector<HostPinning::Range> HostPinning::merged_pages(std::vector<Range> ranges, size_t page) {
    std::vector<std::pair<uintptr_t, uintptr_t>> spans;
    for (const Range& r : ranges) {
        if (r.bytes == 0) continue;
        const uintptr_t b = reinterpret_cast<uintptr_t>(r.ptr) / page * page;
        const uintptr_t e = (reinterpret_cast<uintptr_t>(r.ptr) + r.bytes + page - 1) / page * page;
        spans.push_back({b, e});
    }
    std::sort(spans.begin(), spans.end());
    std::vector<Range> out;
    uintptr_t cb = 0, ce = 0;
    for (auto [b, e] : spans) {
        // Only ranges that share a page merge: adjacent pages may belong to different mappings.
        if (ce != 0) {
            if (b < ce) {
                ce = std::max(ce, e);
                continue;
            }
            out.push_back({reinterpret_cast<const void*>(cb), ce - cb});
        }
        cb = b;
        ce = e;
    }
    if (ce != 0) out.push_back({reinterpret_cast<const void*>(cb), ce - cb});
    return out;
}

Result<std::unique_ptr<HostPinning>> HostPinning::pin(std::vector<Range> ranges, bool read_only) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::unique_ptr<HostPinning> p(new HostPinning());
    for (const Range& r : merged_pages(std::move(ranges), page)) {
        void* ptr = const_cast<void*>(r.ptr);
        H3_TRY(cuda::host_register(ptr, r.bytes, read_only)); // the destructor unlocks what was locked
        p->regions_.push_back(ptr);
        p->bytes_ += r.bytes;
    }
    return p;
}

HostPinning::~HostPinning() {
    for (void* r : regions_) cuda::host_unregister(r);
}

} // namespace h3
