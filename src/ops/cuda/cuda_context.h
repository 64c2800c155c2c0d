// The per-device CUDA state the ops need: a stream, cuBLASLt and cuDNN handles, a GEMM workspace, a
// grow-only scratch buffer and the caches of tuned GEMM algorithms and cuDNN attention plans. Plain C++
// (no CUDA syntax) so that any .cpp can hold one; the handles are opaque here.
#pragma once

#include "core/status.h"
#include "ops/gemm_tuning_table.h"

#include <cstddef>
#include <memory>
#include <mutex>

namespace h3::ops {

namespace cuda_detail {
struct GemmCache;      // cuda/cuda_common.h
struct AttentionCache; // cuda/cuda_common.h
struct Conv3dCache;    // cuda/cuda_common.h
} // namespace cuda_detail

// Which CUDA conv3d implementation runs (H3_CONV3D; set before the call, read per call).
//   kAuto    (default; unset or "auto"): with ctx.allow_tf32 on cc >= 8 the fp16 tensor-core implicit GEMM
//            over a channels-last copy (conv3d_f16.cu; Cin padded to a multiple of 8) — its GEMM on Hopper
//            warpgroup MMAs (conv3d_wgmma.cu) where the build has sm_90a, the device is cc 9.0, the padded
//            Cin is a multiple of 64 and the GEMM fills the device with CTAs, else on mma.sync; otherwise
//            the built-in kernels below.
//   kIgemm16 ("igemm16"): the fp16 path with the mma.sync GEMM only.
//   kWgmma   ("wgmma"): the fp16 path with the wgmma GEMM wherever it can run (any CTA count; tests).
//   kTf32    ("tf32", or "igemm" as before): the built-in NCDHW implicit GEMM only — TF32 tensor cores with
//            allow_tf32 on cc >= 8, fp32 FMA otherwise (the former default).
//   kCudnn   ("cudnn"): cuDNN's convolution in channels-last layout (conv3d_cudnn.cpp); shapes it refuses
//            run as kAuto.
// Without allow_tf32 every choice but kCudnn is the exact fp32 FMA kernel.
enum class Conv3dImpl { kAuto, kIgemm16, kWgmma, kTf32, kCudnn };
// "auto" / "igemm16" / "wgmma" / "tf32" / "cudnn" (the H3_CONV3D spelling).
const char* conv3d_impl_name(Conv3dImpl impl);

class CudaContext {
public:
    // Creates the stream, handles and workspace on `device`. Errors (no device, no driver, cuDNN
    // missing) come back as Status.
    static Result<std::unique_ptr<CudaContext>> create(int device);
    // A context for collectives only (ops/comm_lane.h): a stream of its own on `device`, no cuBLASLt / cuDNN
    // handles and no workspace — the ops other than a communicator's must not run on it.
    static Result<std::unique_ptr<CudaContext>> create_stream_only(int device);
    ~CudaContext();
    CudaContext(const CudaContext&) = delete;
    CudaContext& operator=(const CudaContext&) = delete;

    int device() const { return device_; }
    void* stream() const { return stream_; }     // cudaStream_t
    void* cublaslt() const { return cublaslt_; } // cublasLtHandle_t
    void* cudnn() const { return cudnn_; }       // cudnnHandle_t
    void* gemm_workspace() const { return gemm_workspace_; }
    size_t gemm_workspace_bytes() const { return gemm_workspace_bytes_; }
    int sm_count() const { return sm_count_; }
    int cc_major() const { return cc_major_; }

    // A device buffer of at least `bytes`, valid until the next call (ops on this context's stream only:
    // growing it synchronizes the stream first, so work already queued keeps its old buffer alive).
    Result<void*> scratch(size_t bytes);
    // Counts the scratch buffer's replacements: recorded work (ops/graph.h) that used an older one must be
    // recorded again.
    uint64_t scratch_generation() const;
    size_t scratch_capacity() const; // the bytes the scratch holds now (0 before its first use)

    cuda_detail::GemmCache& gemm_cache() { return *gemm_cache_; }
    cuda_detail::AttentionCache& attention_cache() { return *attention_cache_; }
    cuda_detail::Conv3dCache& conv3d_cache() { return *conv3d_cache_; }

    // GEMM algorithm choice: true (default; H3_GEMM_AUTOTUNE=0 turns it off) times the cuBLASLt heuristic's
    // candidates once per problem and keeps the fastest; false takes the heuristic's first. Set before the
    // first GEMM of a shape (choices are cached).
    bool gemm_autotune() const { return gemm_autotune_; }
    // The tuner's choices (ops/gemm_tuning_table.h): in memory, and in the file H3_GEMM_TUNING_FILE names
    // (read at creation, kept across processes) when set; null only for a stream-only context.
    GemmTuningTable* gemm_tuning_table() const { return gemm_tuning_.get(); }
    void set_gemm_autotune(bool on) { gemm_autotune_ = on; }
    // The conv3d implementation (Conv3dImpl above; H3_CONV3D at creation).
    Conv3dImpl conv3d_impl() const { return conv3d_impl_; }
    void set_conv3d_impl(Conv3dImpl impl) { conv3d_impl_ = impl; }

private:
    CudaContext() = default;

    int device_ = 0;
    void* stream_ = nullptr;
    void* cublaslt_ = nullptr;
    void* cudnn_ = nullptr;
    void* gemm_workspace_ = nullptr;
    size_t gemm_workspace_bytes_ = 0;
    void* scratch_ = nullptr;
    size_t scratch_bytes_ = 0;
    uint64_t scratch_generation_ = 0;
    mutable std::mutex scratch_mutex_;
    int sm_count_ = 0;
    int cc_major_ = 0;
    bool gemm_autotune_ = true;
    Conv3dImpl conv3d_impl_ = Conv3dImpl::kAuto;
    std::unique_ptr<cuda_detail::GemmCache> gemm_cache_;
    std::unique_ptr<cuda_detail::AttentionCache> attention_cache_;
    std::unique_ptr<cuda_detail::Conv3dCache> conv3d_cache_;
    std::unique_ptr<GemmTuningTable> gemm_tuning_;
};

} // namespace h3::ops
