// CPU-only build: CUDA calls report that CUDA is not built in.
#include "core/cuda_api.h"

namespace h3::cuda {
namespace {
Status no_cuda() {
    return unimplemented("this build has no CUDA backend (rebuild with nvcc available)");
}
} // namespace

bool built_with_cuda() {
    return false;
}
int device_count() {
    return 0;
}
Status set_device(int) {
    return no_cuda();
}
Result<void*> malloc_device(size_t, int) {
    return no_cuda();
}
void free_device(void*, int) {}
Result<void*> malloc_pinned(size_t) {
    return no_cuda();
}
void free_pinned(void*) {}
Status memcpy(void*, const void*, size_t, CopyKind kind, void*) {
    return kind == CopyKind::kHostToHost ? internal_error("host copies do not go through cuda::memcpy")
                                         : no_cuda();
}
Status memset_device(void*, int, size_t, void*) {
    return no_cuda();
}
Result<void*> stream_create() {
    return no_cuda();
}
void stream_destroy(void*) {}
Status stream_synchronize(void*) {
    return no_cuda();
}
Status device_synchronize() {
    return no_cuda();
}
Result<void*> event_create() {
    return no_cuda();
}
void event_destroy(void*) {}
Status event_record(void*, void*) {
    return no_cuda();
}
Status stream_wait_event(void*, void*) {
    return no_cuda();
}
Status event_synchronize(void*) {
    return no_cuda();
}
Status host_register(void*, size_t, bool) {
    return no_cuda();
}
void host_unregister(void*) {}
Result<float> event_elapsed_ms(void*, void*) {
    return no_cuda();
}
Result<MemoryInfo> memory_info(int) {
    return no_cuda();
}
} // namespace h3::cuda
