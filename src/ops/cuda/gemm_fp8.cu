// fp8 GEMM (ops/gemm_fp8.h) on CUDA: a row quantizer (per-row power-of-two scales, e4m3 round-to-nearest
// saturating: the CPU reference's bytes) and cuBLASLt's e4m3 matmul. Row-major y[M,N] = x·Wᵀ is the
// column-major problem D[N,M] = Wᵀ-op(A = W)·(B = x), both operands K-major ("TN", the layout cuBLASLt's fp8
// kernels need). The scales go in as outer vectors (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F: A's per
// output channel, B's per x row) where cuBLASLt offers a kernel for that; otherwise the unscaled product goes
// to fp32 scratch and one pass applies x_scale·w_scale (+ bias) and rounds. The algorithm is chosen once per
// problem like the bf16 GEMM's (lt_autotune.h: the heuristic's candidates timed on the first call's operands;
// H3_GEMM_AUTOTUNE=0: the heuristic's first) and cached in the context.
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/lt_autotune.h"
#include "ops/fp8_scale.h"

#include <mutex>
#include <string>

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kQuantThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kQuantThreads)
    quantize_rows_kernel(const T* __restrict__ x, __nv_fp8_storage_t* __restrict__ x8,
                         float* __restrict__ scale, int64_t cols) {
    __shared__ float red[kQuantThreads / 32];
    const T* row = x + blockIdx.x * cols;
    __nv_fp8_storage_t* out = x8 + blockIdx.x * cols;
    float amax = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += kQuantThreads) amax = fmaxf(amax, fabsf(to_f32(row[c])));
    amax = warp_max(amax);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = amax;
    __syncthreads();
    float m = red[0];
#pragma unroll
    for (int w = 1; w < kQuantThreads / 32; ++w) m = fmaxf(m, red[w]);
    const float s = fp8_block_scale(m), inv = 1.0f / s;
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
    for (int64_t c = threadIdx.x; c < cols; c += kQuantThreads)
        out[c] = __nv_cvt_float_to_fp8(to_f32(row[c]) * inv, __NV_SATFINITE, __NV_E4M3);
}

// bf16 rows with cols % 8 == 0 and 16-byte alignment: 8 elements per access.
__global__ void __launch_bounds__(kQuantThreads)
    quantize_rows_bf16x8_kernel(const bf16* __restrict__ x, uint8_t* __restrict__ x8,
                                float* __restrict__ scale, int64_t cols) {
    __shared__ float red[kQuantThreads / 32];
    const uint4* row = reinterpret_cast<const uint4*>(x + blockIdx.x * cols);
    uint2* out = reinterpret_cast<uint2*>(x8 + blockIdx.x * cols);
    const int64_t vecs = cols / 8;
    float amax = 0.0f;
    for (int64_t i = threadIdx.x; i < vecs; i += kQuantThreads) {
        const uint4 raw = row[i];
        const bf16* e = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
        for (int c = 0; c < 8; ++c) amax = fmaxf(amax, fabsf(__bfloat162float(e[c])));
    }
    amax = warp_max(amax);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = amax;
    __syncthreads();
    float m = red[0];
#pragma unroll
    for (int w = 1; w < kQuantThreads / 32; ++w) m = fmaxf(m, red[w]);
    const float s = fp8_block_scale(m), inv = 1.0f / s;
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
    for (int64_t i = threadIdx.x; i < vecs; i += kQuantThreads) {
        const uint4 raw = row[i];
        const bf16* e = reinterpret_cast<const bf16*>(&raw);
        uint32_t w[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(
                make_float2(__bfloat162float(e[4 * h]) * inv, __bfloat162float(e[4 * h + 1]) * inv),
                __NV_SATFINITE, __NV_E4M3);
            const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(
                make_float2(__bfloat162float(e[4 * h + 2]) * inv, __bfloat162float(e[4 * h + 3]) * inv),
                __NV_SATFINITE, __NV_E4M3);
            w[h] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
        }
        out[i] = make_uint2(w[0], w[1]);
    }
}

// y[r, c] = t[r, c]·xs[r]·ws[c] (+ bias[c]), one rounding (the path without outer-vector scales).
template <typename TY>
__global__ void fp8_finish_kernel(const float* __restrict__ t, const float* __restrict__ xs,
                                  const float* __restrict__ ws, const void* __restrict__ bias, int bias_type,
                                  TY* __restrict__ y, int64_t m, int64_t n) {
    const int64_t total = m * n;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = i / n, c = i - r * n;
        float v = t[i] * xs[r] * ws[c];
        if (bias) v += load_any(bias, bias_type, c);
        y[i] = from_f32<TY>(v);
    }
}

struct Lt {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~Lt() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

cudaDataType_t lt_type(DType t) {
    return t == DType::kBF16 ? CUDA_R_16BF : (t == DType::kF16 ? CUDA_R_16F : CUDA_R_32F);
}

Status set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void* v, size_t n,
                const char* what) {
    return cublas_status(cublasLtMatmulDescSetAttribute(d, a, v, n), what);
}

// The descriptors of one fp8 matmul; with outer_vec the A/B scale vectors, else unit scales and D in fp32.
Status make_lt(const Fp8GemmKey& key, bool outer_vec, const void* ws, const void* xs, const void* bias,
               DType bias_type, Lt& d) {
    H3_TRY(
        cublas_status(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate"));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    H3_TRY(set_attr(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta), "set TRANSA"));
    H3_TRY(set_attr(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb), "set TRANSB"));
    const int8_t fast = key.fast_accum ? 1 : 0;
    H3_TRY(set_attr(d.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast), "set FAST_ACCUM"));
    if (outer_vec) {
        const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        H3_TRY(set_attr(d.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode), "set A_SCALE_MODE"));
        H3_TRY(set_attr(d.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode), "set B_SCALE_MODE"));
        H3_TRY(set_attr(d.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws, sizeof(ws), "set A_SCALE_POINTER"));
        H3_TRY(set_attr(d.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &xs, sizeof(xs), "set B_SCALE_POINTER"));
        if (bias) {
            const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
            H3_TRY(set_attr(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi), "set EPILOGUE"));
            H3_TRY(
                set_attr(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias), "set BIAS_POINTER"));
            const cudaDataType_t bt = lt_type(bias_type);
            H3_TRY(
                set_attr(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt), "set BIAS_DATA_TYPE"));
        }
    }
    const cudaDataType_t out = outer_vec ? lt_type(static_cast<DType>(key.y_type)) : CUDA_R_32F;
    H3_TRY(cublas_status(cublasLtMatrixLayoutCreate(&d.a, CUDA_R_8F_E4M3, key.k, key.n, key.k), "layout A"));
    H3_TRY(cublas_status(cublasLtMatrixLayoutCreate(&d.b, CUDA_R_8F_E4M3, key.k, key.m, key.k), "layout B"));
    H3_TRY(cublas_status(cublasLtMatrixLayoutCreate(&d.c, out, key.n, key.m, key.n), "layout C"));
    return ok_status();
}

// The heuristic's candidates for a problem not seen before: with outer-vector scales where cuBLASLt offers a
// kernel for them (and the bias type), else for the fp32-scratch path; found = 0 when it offers neither.
struct Fp8Candidates {
    bool outer_vec = false;
    int found = 0;
    cublasLtMatmulHeuristicResult_t res[kLtCandidates] = {};
};

Status fp8_candidates(const Context& ctx, const Fp8GemmKey& key, bool bias_ok, const Tensor& w_scale,
                      const Tensor& bias, Fp8Candidates& out) {
    const int want = ctx.cuda->gemm_autotune() ? kLtCandidates : 1;
    for (bool outer : {true, false}) {
        if (outer && !bias_ok) continue;
        Lt d; // the heuristic does not depend on the pointer values: the weight's scales stand in for x's
        H3_TRY(make_lt(key, outer, w_scale.data(), w_scale.data(), bias.defined() ? bias.data() : nullptr,
                       bias.dtype(), d));
        H3_TRY(cublas_status(cublasLtMatmulPreferenceCreate(&d.pref), "PreferenceCreate"));
        uint64_t wsb = ctx.cuda->gemm_workspace_bytes();
        H3_TRY(cublas_status(cublasLtMatmulPreferenceSetAttribute(
                                 d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)),
                             "set MAX_WORKSPACE"));
        int found = 0;
        const cublasStatus_t s =
            cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(ctx.cuda->cublaslt()), d.op, d.a,
                                           d.b, d.c, d.c, d.pref, want, out.res, &found);
        if (s == CUBLAS_STATUS_ALLOC_FAILED || s == CUBLAS_STATUS_NOT_INITIALIZED)
            return cublas_status(s, "AlgoGetHeuristic(fp8)");
        if (s == CUBLAS_STATUS_SUCCESS && found > 0) {
            out.outer_vec = outer, out.found = found;
            return ok_status();
        }
    }
    out.found = 0;
    return ok_status();
}

int64_t round256(int64_t b) {
    return (b + 255) / 256 * 256;
}

Status quantize_rows(const Context& ctx, const void* x, DType type, int64_t rows, int64_t cols, uint8_t* x8,
                     float* scale) {
    if (rows == 0 || cols == 0) return ok_status();
    if (rows > 0x7fffffff) return unimplemented("quantize_rows_fp8: more than 2^31 rows");
    const dim3 grid(static_cast<unsigned>(rows));
    if (type == DType::kBF16 && cols % 8 == 0 && pointer_alignment(x) >= 16 && pointer_alignment(x8) >= 8) {
        quantize_rows_bf16x8_kernel<<<grid, kQuantThreads, 0, stream_of(ctx)>>>(static_cast<const bf16*>(x),
                                                                                x8, scale, cols);
        return check_launch("quantize_rows_bf16x8");
    }
    return dispatch_float(type, [&](auto tx) {
        using T = typename decltype(tx)::type;
        quantize_rows_kernel<T><<<grid, kQuantThreads, 0, stream_of(ctx)>>>(
            static_cast<const T*>(x), reinterpret_cast<__nv_fp8_storage_t*>(x8), scale, cols);
        return check_launch("quantize_rows_fp8");
    });
}

} // namespace

Status quantize_rows_fp8(const Context& ctx, const Tensor& x, Tensor& x8, Tensor& scale) {
    return quantize_rows(ctx, x.data(), x.dtype(), x.dim(0), x.dim(1), x8.data_as<uint8_t>(),
                         scale.data_as<float>());
}

namespace {

// The e4m3 product y = (x8·w8ᵀ)·x_scale·w_scale (+ bias) for m rows of K = k. The rows are rounded here from
// x (bf16, into the scratch's head) unless `given` holds them already rounded (x8 [m, k] bytes, scales [m]).
struct Fp8Rows {
    const uint8_t* x8 = nullptr;
    const float* scale = nullptr;
};
Status fp8_product(const Context& ctx, const Fp8GemmParams& p, int64_t m, int64_t k, const Tensor* x,
                   Fp8Rows given, const Fp8Weight& w, const Tensor& bias, Tensor& y) {
    const int64_t n = w.data.dim(0);
    if (m == 0 || n == 0) return ok_status();
    if (k % 16 != 0) return unimplemented("gemm_fp8: K = " + std::to_string(k) + " is not a multiple of 16");
    const bool rounded = given.x8 != nullptr;
    // The algorithms are asked for without alignment preferences, so cuBLASLt's default (256 bytes) holds:
    // given rows or scales off it (a slice) are copied to the scratch's head first.
    auto off256 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 256 != 0; };
    const bool copy_x8 = rounded && off256(given.x8);
    const bool copy_xs = rounded && off256(given.scale);
    const int64_t x8_bytes = !rounded || copy_x8 ? round256(m * k) : 0;
    const int64_t xs_bytes = !rounded || copy_xs ? round256(m * 4) : 0;
    const bool bias_ok = !bias.defined() || bias.dtype() == DType::kF32 || bias.dtype() == DType::kBF16;
    const Fp8GemmKey key{
        m,           n, k, static_cast<int>(y.dtype()), bias.defined() ? static_cast<int>(bias.dtype()) : -1,
        p.fast_accum};
    GemmCache& cache = ctx.cuda->gemm_cache();
    Fp8GemmAlgo algo;
    const bool cached = find_cached(cache.mutex, cache.fp8, key, algo);
    Fp8Candidates cand;
    if (!cached) {
        // A new problem is timed (events, a host wait): impossible while the stream records a CUDA graph.
        if (stream_recording(ctx))
            return invalid_argument(
                "gemm_fp8: the problem " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                std::to_string(k) +
                " was first seen while recording a CUDA graph (run it once unrecorded first)");
        H3_TRY(fp8_candidates(ctx, key, bias_ok, w.scale, bias, cand));
        algo.outer_vec = cand.outer_vec;
        algo.lt.supported = cand.found > 0;
        algo.lt.candidates = cand.found;
        if (!algo.lt.supported) store_cached(cache.mutex, cache.fp8, key, algo);
    }
    if (!algo.lt.supported)
        return unimplemented(
            "gemm_fp8: cuBLASLt offers no e4m3 kernel on this device (needs sm_89 or newer)");
    const bool outer = algo.outer_vec;
    static std::once_flag logged;
    std::call_once(logged, [&] {
        log_info(std::string("gemm_fp8: cuBLASLt e4m3 ") +
                 (outer ? "with outer-vector scales"
                        : "into fp32 scratch + a scaling pass (no outer-vector kernel)"));
    });
    // The scratch holds x8 | x scales (unless given) | (without outer-vector scales) the fp32 product.
    const int64_t tmp_bytes = outer ? 0 : m * n * 4;
    void* scratch = nullptr;
    if (x8_bytes + xs_bytes + tmp_bytes > 0) {
        H3_ASSIGN_OR_RETURN(scratch, ctx.cuda->scratch(static_cast<size_t>(x8_bytes + xs_bytes + tmp_bytes)));
    }
    uint8_t* head = static_cast<uint8_t*>(scratch);
    const uint8_t* x8p = rounded && !copy_x8 ? given.x8 : head;
    const float* xs = rounded && !copy_xs ? given.scale : reinterpret_cast<const float*>(head + x8_bytes);
    float* tmp = reinterpret_cast<float*>(head + x8_bytes + xs_bytes);
    if (!rounded)
        H3_TRY(
            quantize_rows(ctx, x->data(), x->dtype(), m, k, head, reinterpret_cast<float*>(head + x8_bytes)));
    if (copy_x8)
        H3_CUDA_TRY(cudaMemcpyAsync(head, given.x8, static_cast<size_t>(m * k), cudaMemcpyDeviceToDevice,
                                    stream_of(ctx)),
                    "cudaMemcpyAsync(gemm_fp8 rows)");
    if (copy_xs)
        H3_CUDA_TRY(cudaMemcpyAsync(head + x8_bytes, given.scale, static_cast<size_t>(m * 4),
                                    cudaMemcpyDeviceToDevice, stream_of(ctx)),
                    "cudaMemcpyAsync(gemm_fp8 row scales)");
    Lt d;
    H3_TRY(make_lt(key, outer, w.scale.data(), xs, bias.defined() ? bias.data() : nullptr, bias.dtype(), d));
    const float one = 1.0f, zero = 0.0f;
    void* dst = outer ? y.data() : static_cast<void*>(tmp);
    const auto handle = static_cast<cublasLtHandle_t>(ctx.cuda->cublaslt());
    auto matmul = [&](const cublasLtMatmulAlgo_t& a) {
        return cublasLtMatmul(handle, d.op, &one, w.data.data(), d.a, x8p, d.b, &zero, dst, d.c, dst, d.c, &a,
                              ctx.cuda->gemm_workspace(), ctx.cuda->gemm_workspace_bytes(), stream_of(ctx));
    };
    if (!cached) { // time the candidates on these operands (the trial runs write dst, overwritten below)
        const GemmTuningTable::Key tkey = {key.m,         key.n,          key.k, key.y_type,
                                           key.bias_type, key.fast_accum, outer};
        const std::optional<int> kept = kept_lt_choice(ctx, "fp8", tkey, cand.found);
        if (kept && cand.res[*kept].state == CUBLAS_STATUS_SUCCESS) { // an earlier process timed it
            algo.lt.chosen = *kept;
        } else {
            H3_ASSIGN_OR_RETURN(const LtChoice choice, fastest_lt_candidate(ctx, cand.found, [&](int i) {
                                    if (cand.res[i].state != CUBLAS_STATUS_SUCCESS) return cand.res[i].state;
                                    return matmul(cand.res[i].algo);
                                }));
            algo.lt.chosen = choice.chosen, algo.lt.best_ms = choice.best_ms;
            keep_lt_choice(ctx, "fp8", tkey, cand.found, choice);
        }
        algo.lt.algo = cand.res[algo.lt.chosen].algo;
        store_cached(cache.mutex, cache.fp8, key, algo);
    }
    H3_TRY(cublas_status(matmul(algo.lt.algo), "cublasLtMatmul(fp8)"));
    if (outer) return ok_status();
    return dispatch_float(y.dtype(), [&](auto ty) {
        using TY = typename decltype(ty)::type;
        fp8_finish_kernel<TY><<<grid_for(m * n, 256), 256, 0, stream_of(ctx)>>>(
            tmp, xs, w.scale.data_as<const float>(), bias.defined() ? bias.data() : nullptr,
            static_cast<int>(bias.dtype()), y.data_as<TY>(), m, n);
        return check_launch("fp8_finish");
    });
}

} // namespace

Status gemm_fp8(const Context& ctx, const Fp8GemmParams& p, const Tensor& x, const Fp8Weight& w,
                const Tensor& bias, Tensor& y) {
    return fp8_product(ctx, p, x.dim(0), x.dim(1), &x, {}, w, bias, y);
}

Status gemm_fp8_quantized(const Context& ctx, const Fp8GemmParams& p, const Tensor& x8, const Tensor& x_scale,
                          const Fp8Weight& w, const Tensor& bias, Tensor& y) {
    return fp8_product(ctx, p, x8.dim(0), x8.dim(1), nullptr,
                       {x8.data_as<const uint8_t>(), x_scale.data_as<const float>()}, w, bias, y);
}

} // namespace h3::ops::cuda_impl
