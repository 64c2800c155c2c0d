// CUDA build: thin wrappers over the CUDA runtime.
#include "core/cuda_api.h"

#include <cuda_runtime.h>

#include <string>

namespace h3::cuda {
namespace {
Status from_cuda(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return ok_status();
    cudaGetLastError(); // clear sticky-free errors
    ErrorCode code = err == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal;
    return Status(code, std::string(what) + " failed: " + cudaGetErrorString(err));
}
} // namespace

bool built_with_cuda() {
    return true;
}

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

Status set_device(int index) {
    return from_cuda(cudaSetDevice(index), "cudaSetDevice");
}

Result<void*> malloc_device(size_t bytes, int device) {
    H3_TRY(set_device(device));
    void* p = nullptr;
    if (bytes == 0) return p;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess)
        return from_cuda(
            err,
            ("cudaMalloc of " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(device)).c_str());
    return p;
}

void free_device(void* ptr, int device) {
    if (!ptr) return;
    cudaSetDevice(device);
    cudaFree(ptr);
}

Result<void*> malloc_pinned(size_t bytes) {
    void* p = nullptr;
    if (bytes == 0) return p;
    H3_TRY(from_cuda(cudaMallocHost(&p, bytes), "cudaMallocHost"));
    return p;
}

void free_pinned(void* ptr) {
    if (ptr) cudaFreeHost(ptr);
}

Status memcpy(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) {
    cudaMemcpyKind k = cudaMemcpyDefault;
    switch (kind) {
    case CopyKind::kHostToDevice:
        k = cudaMemcpyHostToDevice;
        break;
    case CopyKind::kDeviceToHost:
        k = cudaMemcpyDeviceToHost;
        break;
    case CopyKind::kDeviceToDevice:
        k = cudaMemcpyDeviceToDevice;
        break;
    case CopyKind::kHostToHost:
        k = cudaMemcpyHostToHost;
        break;
    }
    if (stream)
        return from_cuda(cudaMemcpyAsync(dst, src, bytes, k, static_cast<cudaStream_t>(stream)),
                         "cudaMemcpyAsync");
    // A synchronous copy must see all earlier work: ops run on non-blocking streams, which the legacy
    // default stream does not wait for, so synchronize the device first. And it must be finished when it
    // returns: cudaMemcpy from pageable host memory returns once the source is staged, before the DMA into
    // device memory lands, and a kernel launched next on a non-blocking stream does not wait for the legacy
    // stream (Ops.Attention read a half-uploaded q on the H200 about one run in ten) — synchronize after too.
    // (Copies into host memory have completed when cudaMemcpy returns: no second synchronize for them.)
    H3_TRY(from_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
    H3_TRY(from_cuda(cudaMemcpy(dst, src, bytes, k), "cudaMemcpy"));
    if (kind == CopyKind::kDeviceToHost || kind == CopyKind::kHostToHost) return ok_status();
    return from_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

Status memset_device(void* dst, int value, size_t bytes, void* stream) {
    if (stream)
        return from_cuda(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)),
                         "cudaMemsetAsync");
    // cudaMemset is asynchronous on the legacy stream, which non-blocking streams do not wait for: finish it.
    H3_TRY(from_cuda(cudaMemset(dst, value, bytes), "cudaMemset"));
    return from_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

Result<void*> stream_create() {
    cudaStream_t s = nullptr;
    H3_TRY(from_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    return static_cast<void*>(s);
}

void stream_destroy(void* stream) {
    if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

Status stream_synchronize(void* stream) {
    return from_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

Status device_synchronize() {
    return from_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

Result<void*> event_create() {
    cudaEvent_t e = nullptr;
    H3_TRY(from_cuda(cudaEventCreate(&e), "cudaEventCreate"));
    return static_cast<void*>(e);
}

void event_destroy(void* event) {
    if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

Status event_record(void* event, void* stream) {
    return from_cuda(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)),
                     "cudaEventRecord");
}

Status stream_wait_event(void* stream, void* event) {
    return from_cuda(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
        "cudaStreamWaitEvent");
}

Status event_synchronize(void* event) {
    return from_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
}

Status host_register(void* ptr, size_t bytes, bool read_only) {
    if (bytes == 0) return ok_status();
    unsigned flags = cudaHostRegisterPortable | (read_only ? cudaHostRegisterReadOnly : 0u);
    return from_cuda(cudaHostRegister(ptr, bytes, flags),
                     ("cudaHostRegister of " + std::to_string(bytes) + " bytes").c_str());
}

void host_unregister(void* ptr) {
    if (ptr) cudaHostUnregister(ptr);
}

Result<float> event_elapsed_ms(void* start, void* end) {
    float ms = 0.0f;
    H3_TRY(
        from_cuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
                  "cudaEventElapsedTime"));
    return ms;
}

Result<MemoryInfo> memory_info(int device) {
    H3_TRY(set_device(device));
    MemoryInfo info;
    H3_TRY(from_cuda(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo"));
    return info;
}

} // namespace h3::cuda
