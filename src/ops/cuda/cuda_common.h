// Host-side helpers shared by the CUDA ops (plain C++: the CUDA runtime, cuBLASLt and cuDNN headers are C
// headers that any host compiler reads). Private to ops/cuda.
#pragma once

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/context.h"
#include "ops/cuda/cuda_context.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace h3::ops::cuda_detail {

inline Status cuda_status(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return ok_status();
    std::string m =
        std::string("CUDA: ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return e == cudaErrorMemoryAllocation ? out_of_memory(m) : internal_error(m);
}

inline Status cublas_status(cublasStatus_t s, const char* what) {
    if (s == CUBLAS_STATUS_SUCCESS) return ok_status();
    std::string m = std::string("cuBLASLt: ") + what + ": status " + std::to_string(static_cast<int>(s));
    return s == CUBLAS_STATUS_ALLOC_FAILED ? out_of_memory(m) : internal_error(m);
}

inline Status cudnn_status(cudnnStatus_t s, const char* what) {
    if (s == CUDNN_STATUS_SUCCESS) return ok_status();
    char buf[512] = {0};
    cudnnGetLastErrorString(buf, sizeof(buf));
    return internal_error(std::string("cuDNN: ") + what + ": " + cudnnGetErrorString(s) +
                          (buf[0] ? std::string(": ") + buf : std::string()));
}

// After every kernel launch: a bad configuration shows up here, not at the next sync.
inline Status check_launch(const char* kernel) {
    return cuda_status(cudaGetLastError(), kernel);
}

inline cudaStream_t stream_of(const Context& ctx) {
    return static_cast<cudaStream_t>(ctx.cuda->stream());
}

// Largest power of two (<= 16) dividing the address: what vector width / cuBLASLt alignment it allows.
inline int pointer_alignment(const void* p) {
    auto a = reinterpret_cast<uintptr_t>(p);
    int align = 16;
    while (align > 1 && (a % static_cast<uintptr_t>(align)) != 0) align /= 2;
    return align;
}

// ---- caches
// --------------------------------------------------------------------------------------------------
struct GemmKey {
    int64_t m, n, k;
    int x_type, y_type, bias_type; // DType as int; bias_type -1 without bias
    bool accumulate;
    int align_x, align_w, align_y, align_bias;
    auto tie() const {
        return std::tie(m, n, k, x_type, y_type, bias_type, accumulate, align_x, align_w, align_y,
                        align_bias);
    }
    bool operator<(const GemmKey& o) const { return tie() < o.tie(); }
};

struct GemmAlgo {
    bool supported = false; // false: cuBLASLt offered nothing for this combination (use the fallback)
    cublasLtMatmulAlgo_t algo{};
    int candidates = 0;   // heuristic results considered
    int chosen = 0;       // index of the kept one among them (0: the heuristic's first)
    float best_ms = 0.0f; // its time when the candidates were timed
};

// The e4m3 GEMM (gemm_fp8.cu): per problem, the algorithm and whether it takes outer-vector scales.
struct Fp8GemmKey {
    int64_t m, n, k;
    int y_type, bias_type; // DType as int; bias_type -1 without bias
    bool fast_accum;
    auto tie() const { return std::tie(m, n, k, y_type, bias_type, fast_accum); }
    bool operator<(const Fp8GemmKey& o) const { return tie() < o.tie(); }
};
struct Fp8GemmAlgo {
    GemmAlgo lt;
    bool outer_vec = false; // false: the unscaled product goes to fp32 scratch and one pass scales it
};

// A per-problem choice kept in a context cache (GEMM, e4m3 GEMM, cuDNN conv3d): read and written under the
// cache's mutex. find_cached copies the entry into `out` and returns true when there is one.
template <class Map>
bool find_cached(std::mutex& mutex, const Map& map, const typename Map::key_type& key,
                 typename Map::mapped_type& out) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = map.find(key);
    if (it == map.end()) return false;
    out = it->second;
    return true;
}
template <class Map>
void store_cached(std::mutex& mutex, Map& map, const typename Map::key_type& key,
                  const typename Map::mapped_type& value) {
    std::lock_guard<std::mutex> lock(mutex);
    map[key] = value;
}

struct GemmCache {
    std::mutex mutex;
    std::map<GemmKey, GemmAlgo> algos;
    std::map<Fp8GemmKey, Fp8GemmAlgo> fp8;
};

// conv3d through cuDNN's convolution (conv3d_cudnn.cpp): the algorithm chosen per problem.
struct Conv3dKey {
    std::vector<int> dims; // x, w, pads, strides, math
    bool operator<(const Conv3dKey& o) const { return dims < o.dims; }
};
struct Conv3dAlgo {
    bool supported = false; // false: no usable cuDNN algorithm (the implicit GEMM kernels run instead)
    int algo = 0;           // cudnnConvolutionFwdAlgo_t
    int math = 0;           // cudnnMathType_t
    size_t workspace = 0;
};
struct Conv3dCache {
    std::mutex mutex;
    std::map<Conv3dKey, Conv3dAlgo> algos;
};

// A finalized cuDNN execution plan and every descriptor it was built from (kept alive with it).
struct AttentionPlan {
    cudnnBackendDescriptor_t plan = nullptr;
    std::vector<cudnnBackendDescriptor_t> keep;
    int64_t workspace = 0;
    std::string info;   // for logs
    std::string config; // graph, engine and knobs: names the candidate in benches
    AttentionPlan() = default;
    AttentionPlan(const AttentionPlan&) = delete;
    AttentionPlan& operator=(const AttentionPlan&) = delete;
    ~AttentionPlan() {
        if (plan) cudnnBackendDestroyDescriptor(plan);
        for (auto it = keep.rbegin(); it != keep.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
    }
};

struct AttentionKey {
    int64_t sq, sk, heads, dim; // per sequence
    int dtype;
    int64_t batch = 1; // sequences in one call (cuDNN's batch dimension)
    auto tie() const { return std::tie(sq, sk, heads, dim, dtype, batch); }
    bool operator<(const AttentionKey& o) const { return tie() < o.tie(); }
};

struct AttentionCache {
    std::mutex mutex;
    // nullptr entry: no plan could be built for this key (do not retry every call).
    std::map<AttentionKey, std::shared_ptr<AttentionPlan>> plans;
    // Every distinct plan the heuristics offer for a key (the first is the default above).
    std::map<AttentionKey, std::vector<std::shared_ptr<AttentionPlan>>> candidates;
};

} // namespace h3::ops::cuda_detail

#define H3_CUDA_TRY(expr, what) H3_TRY(::h3::ops::cuda_detail::cuda_status((expr), what))

namespace h3::ops::cuda_detail {

// Logging without pulling spdlog into nvcc-compiled files (cuda_log.cpp forwards to core/log.h).
void log_warning(const std::string& message);
void log_info(const std::string& message);

// cuDNN fused attention (attention_cudnn.cpp). Returns the cached plan for this shape, building it on first
// use; nullptr (also cached) when cuDNN offers no engine, with `why` set on the first failure.
std::shared_ptr<AttentionPlan> cudnn_attention_plan(const Context& ctx, const AttentionKey& key,
                                                    std::string& why);
// Every distinct plan cuDNN's heuristics (modes A, B, fallback) offer for the key, cached; empty with `why`
// set when none builds.
std::vector<std::shared_ptr<AttentionPlan>>
cudnn_attention_candidates(const Context& ctx, const AttentionKey& key, std::string& why);
// Runs the plan on ctx's stream. Pointers are device pointers; scale is passed by value.
Status cudnn_attention_run(const Context& ctx, const AttentionPlan& plan, const void* q, const void* k,
                           const void* v, void* o, float scale);

} // namespace h3::ops::cuda_detail
