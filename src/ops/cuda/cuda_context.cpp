#include "ops/cuda/cuda_context.h"

#include "ops/cuda/cuda_common.h"

#include <cstdlib>
#include <string>

namespace h3::ops {

using cuda_detail::cublas_status;
using cuda_detail::cuda_status;
using cuda_detail::cudnn_status;

namespace {
// cuBLASLt's larger Hopper kernels (stream-K, split-K) want tens of MiB of workspace to reach peak.
constexpr size_t kGemmWorkspaceBytes = size_t{64} << 20;

// H3_CONV3D's value; an unknown one keeps the default (with a warning, so a typo does not go unnoticed).
Conv3dImpl parse_conv3d_impl(const std::string& v) {
    if (v == "auto" || v.empty()) return Conv3dImpl::kAuto;
    if (v == "igemm16") return Conv3dImpl::kIgemm16;
    if (v == "wgmma") return Conv3dImpl::kWgmma;
    if (v == "tf32" || v == "igemm") return Conv3dImpl::kTf32;
    if (v == "cudnn") return Conv3dImpl::kCudnn;
    cuda_detail::log_warning("H3_CONV3D=" + v +
                             " is not one of auto, igemm16, wgmma, tf32, cudnn: using auto");
    return Conv3dImpl::kAuto;
}
} // namespace

const char* conv3d_impl_name(Conv3dImpl impl) {
    switch (impl) {
    case Conv3dImpl::kAuto:
        return "auto";
    case Conv3dImpl::kIgemm16:
        return "igemm16";
    case Conv3dImpl::kWgmma:
        return "wgmma";
    case Conv3dImpl::kTf32:
        return "tf32";
    case Conv3dImpl::kCudnn:
        return "cudnn";
    }
    return "?";
}

Result<std::unique_ptr<CudaContext>> CudaContext::create(int device) {
    int count = 0;
    H3_TRY(cuda_status(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
    if (device < 0 || device >= count)
        return invalid_argument("CUDA device " + std::to_string(device) + " does not exist (" +
                                std::to_string(count) + " visible)");
    H3_ASSIGN_OR_RETURN(std::unique_ptr<CudaContext> c, create_stream_only(device));
    if (const char* e = std::getenv("H3_GEMM_AUTOTUNE")) c->gemm_autotune_ = std::string(e) != "0";
    if (const char* e = std::getenv("H3_CONV3D")) c->conv3d_impl_ = parse_conv3d_impl(e);

    cublasLtHandle_t lt = nullptr;
    H3_TRY(cublas_status(cublasLtCreate(&lt), "cublasLtCreate"));
    c->cublaslt_ = lt;

    cudnnHandle_t dnn = nullptr;
    H3_TRY(cudnn_status(cudnnCreate(&dnn), "cudnnCreate"));
    c->cudnn_ = dnn;
    H3_TRY(cudnn_status(cudnnSetStream(dnn, static_cast<cudaStream_t>(c->stream_)), "cudnnSetStream"));

    void* ws = nullptr;
    H3_TRY(cuda_status(cudaMalloc(&ws, kGemmWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)"));
    c->gemm_workspace_ = ws;
    c->gemm_workspace_bytes_ = kGemmWorkspaceBytes;
    return c;
}

// The device, its properties, the caches and one non-blocking stream; create() adds the library handles.
Result<std::unique_ptr<CudaContext>> CudaContext::create_stream_only(int device) {
    H3_TRY(cuda_status(cudaSetDevice(device), "cudaSetDevice"));
    std::unique_ptr<CudaContext> c(new CudaContext());
    c->device_ = device;
    c->gemm_cache_ = std::make_unique<cuda_detail::GemmCache>();
    c->attention_cache_ = std::make_unique<cuda_detail::AttentionCache>();
    c->conv3d_cache_ = std::make_unique<cuda_detail::Conv3dCache>();
    cudaDeviceProp prop{};
    H3_TRY(cuda_status(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties"));
    c->sm_count_ = prop.multiProcessorCount;
    c->cc_major_ = prop.major;
    cudaStream_t s = nullptr;
    H3_TRY(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    c->stream_ = s;
    return c;
}

CudaContext::~CudaContext() {
    // Best effort on teardown: nothing here can report an error to anyone.
    cudaSetDevice(device_);
    if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    attention_cache_.reset(); // plans before the cuDNN handle they were built on
    gemm_cache_.reset();
    conv3d_cache_.reset();
    if (scratch_) cudaFree(scratch_);
    if (gemm_workspace_) cudaFree(gemm_workspace_);
    if (cudnn_) cudnnDestroy(static_cast<cudnnHandle_t>(cudnn_));
    if (cublaslt_) cublasLtDestroy(static_cast<cublasLtHandle_t>(cublaslt_));
    if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

Result<void*> CudaContext::scratch(size_t bytes) {
    std::lock_guard<std::mutex> lock(scratch_mutex_);
    if (bytes <= scratch_bytes_) return scratch_;
    H3_TRY(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
    if (scratch_) {
        // Queued kernels may still read the old buffer.
        H3_TRY(
            cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize"));
        cudaFree(scratch_);
        scratch_ = nullptr;
        scratch_bytes_ = 0;
    }
    size_t want = bytes + bytes / 4; // headroom so that slowly growing requests do not realloc every call
    void* p = nullptr;
    H3_TRY(cuda_status(cudaMalloc(&p, want), "cudaMalloc(scratch)"));
    scratch_ = p;
    scratch_bytes_ = want;
    ++scratch_generation_;
    return p;
}

size_t CudaContext::scratch_capacity() const {
    std::lock_guard<std::mutex> lock(scratch_mutex_);
    return scratch_bytes_;
}

uint64_t CudaContext::scratch_generation() const {
    std::lock_guard<std::mutex> lock(scratch_mutex_);
    return scratch_generation_;
}

} // namespace h3::ops
