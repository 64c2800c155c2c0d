// GEMM y = alpha·x·Wᵀ (+bias) (+y) through cuBLASLt, fp32 accumulation (CUBLAS_COMPUTE_32F: exact fp32,
// never TF32, for f32 inputs). Row-major y[M,N] is column-major yᵀ[N,M] = W·xᵀ, so cuBLASLt sees
// A = W (transposed, [K,N] col-major), B = x ([K,M] col-major), D = y ([N,M] col-major): no copies.
// Combinations cuBLASLt has no kernel for (e.g. f32 inputs with a bf16 output, or a bias dtype its epilogue
// refuses) run as an fp32 GEMM into scratch plus one finishing kernel, with the same single rounding.
// Algorithm choice, once per problem (shape, dtypes, epilogue, operand alignment) and cached in the context:
// the heuristic's first few candidates are timed on the call's own operands and the fastest is kept
// (CudaContext::gemm_autotune, H3_GEMM_AUTOTUNE=0: the heuristic's first, as before).
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/lt_autotune.h"

#include <memory>
#include <vector>

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

cudaDataType_t cuda_type(DType t) {
    switch (t) {
    case DType::kBF16:
        return CUDA_R_16BF;
    case DType::kF16:
        return CUDA_R_16F;
    default:
        return CUDA_R_32F;
    }
}

// RAII for the per-call cuBLASLt descriptors (cheap host objects; only the algorithm is cached).
struct LtDescs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtDescs() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

struct LtProblem {
    int64_t m, n, k; // row-major: x [m,k], w [n,k], y [m,n]
    DType in_type, out_type;
    const void* bias = nullptr;
    DType bias_type = DType::kF32;
};

Status make_descs(const LtProblem& pr, LtDescs& d) {
    H3_TRY(
        cublas_status(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate"));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    H3_TRY(cublas_status(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
                         "set TRANSA"));
    H3_TRY(cublas_status(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
                         "set TRANSB"));
    if (pr.bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        H3_TRY(cublas_status(
            cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
            "set EPILOGUE"));
        H3_TRY(cublas_status(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pr.bias,
                                                            sizeof(pr.bias)),
                             "set BIAS_POINTER"));
        cudaDataType_t bt = cuda_type(pr.bias_type);
        H3_TRY(cublas_status(
            cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)),
            "set BIAS_DATA_TYPE"));
    }
    const cudaDataType_t in = cuda_type(pr.in_type), out = cuda_type(pr.out_type);
    H3_TRY(cublas_status(cublasLtMatrixLayoutCreate(&d.a, in, pr.k, pr.n, pr.k), "layout A"));
    H3_TRY(cublas_status(cublasLtMatrixLayoutCreate(&d.b, in, pr.k, pr.m, pr.k), "layout B"));
    H3_TRY(cublas_status(cublasLtMatrixLayoutCreate(&d.c, out, pr.n, pr.m, pr.n), "layout C"));
    return ok_status();
}

// The operands of one call, for timing candidates on them.
struct LtCall {
    float alpha = 1.0f;
    bool accumulate = false;
    const void* x = nullptr;
    const void* w = nullptr;
    void* y = nullptr;
    size_t y_bytes = 0;
};

// The fastest of the heuristic's candidates on the call's operands (lt_autotune.h). The trial runs write y
// itself when the call overwrites it anyway (beta = 0); with accumulate they write a scratch copy and read y
// as C, so the real call still sees the old y.
Result<LtChoice> fastest_candidate(const Context& ctx, const LtDescs& d,
                                   const cublasLtMatmulHeuristicResult_t* res, int found,
                                   const LtCall& call) {
    if (found <= 1 || !lt_timing_possible(ctx)) return LtChoice{}; // before any scratch is taken
    void* out = call.y;
    if (call.accumulate) {
        H3_ASSIGN_OR_RETURN(out, ctx.cuda->scratch(call.y_bytes));
    }
    const float beta = call.accumulate ? 1.0f : 0.0f;
    const auto handle = static_cast<cublasLtHandle_t>(ctx.cuda->cublaslt());
    return fastest_lt_candidate(ctx, found, [&](int i) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) return res[i].state;
        return cublasLtMatmul(handle, d.op, &call.alpha, call.w, d.a, call.x, d.b, &beta, call.y, d.c, out,
                              d.c, &res[i].algo, ctx.cuda->gemm_workspace(), ctx.cuda->gemm_workspace_bytes(),
                              stream_of(ctx));
    });
}

// The cached choice for this problem (supported == false when cuBLASLt offers none).
Status find_algo(const Context& ctx, const LtProblem& pr, const GemmKey& key, LtDescs& d, const LtCall& call,
                 GemmAlgo& out) {
    GemmCache& cache = ctx.cuda->gemm_cache();
    if (find_cached(cache.mutex, cache.algos, key, out)) return ok_status();
    // A new problem is timed (events, a host wait): impossible while the stream records a CUDA graph. Work
    // that records runs once unrecorded first (the DiT: dit_graphs.cpp), so this only stops a recording
    // that would otherwise cache an untimed choice.
    if (cuda_impl::stream_recording(ctx))
        return invalid_argument(
            "gemm: the problem " + std::to_string(pr.m) + "x" + std::to_string(pr.n) + "x" +
            std::to_string(pr.k) +
            " was first seen while recording a CUDA graph (run it once unrecorded first)");
    H3_TRY(cublas_status(cublasLtMatmulPreferenceCreate(&d.pref), "PreferenceCreate"));
    uint64_t ws = ctx.cuda->gemm_workspace_bytes();
    H3_TRY(cublas_status(cublasLtMatmulPreferenceSetAttribute(
                             d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                         "set MAX_WORKSPACE"));
    // Alignment the heuristic may assume (it picks vectorized kernels only for aligned operands).
    const std::pair<cublasLtMatmulPreferenceAttributes_t, int> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y}};
    for (auto [attr, v] : aligns) {
        uint32_t a = static_cast<uint32_t>(v);
        H3_TRY(cublas_status(cublasLtMatmulPreferenceSetAttribute(d.pref, attr, &a, sizeof(a)),
                             "set ALIGNMENT"));
    }
    cublasLtMatmulHeuristicResult_t results[kLtCandidates] = {};
    const int want = ctx.cuda->gemm_autotune() ? kLtCandidates : 1;
    int found = 0;
    cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(ctx.cuda->cublaslt()), d.op, d.a, d.b,
                                       d.c, d.c, d.pref, want, results, &found);
    GemmAlgo algo;
    if (s == CUBLAS_STATUS_SUCCESS && found > 0) {
        algo.supported = true;
        algo.candidates = found;
        const GemmTuningTable::Key tkey = {key.m,       key.n,         key.k,          key.x_type,
                                           key.y_type,  key.bias_type, key.accumulate, key.align_x,
                                           key.align_w, key.align_y,   key.align_bias};
        const std::optional<int> kept = kept_lt_choice(ctx, "gemm", tkey, found);
        if (kept && results[*kept].state == CUBLAS_STATUS_SUCCESS) { // an earlier process timed it
            algo.chosen = *kept;
        } else {
            H3_ASSIGN_OR_RETURN(const LtChoice choice, fastest_candidate(ctx, d, results, found, call));
            algo.chosen = choice.chosen, algo.best_ms = choice.best_ms;
            keep_lt_choice(ctx, "gemm", tkey, found, choice);
        }
        algo.algo = results[algo.chosen].algo;
    } else if (s == CUBLAS_STATUS_ALLOC_FAILED || s == CUBLAS_STATUS_NOT_INITIALIZED) {
        return cublas_status(s, "AlgoGetHeuristic");
    }
    // Anything else (NOT_SUPPORTED, or INVALID_VALUE, which cuBLASLt 13 returns for e.g. an f32 bias with a
    // bf16 output, seen on the H200) means "no kernel for this combination": cached, and the caller falls
    // back to the fp32-scratch path.
    store_cached(cache.mutex, cache.algos, key, algo);
    out = algo;
    return ok_status();
}

GemmKey make_key(const LtProblem& pr, bool accumulate, const void* x, const void* w, const void* y) {
    GemmKey k{};
    k.m = pr.m, k.n = pr.n, k.k = pr.k;
    k.x_type = static_cast<int>(pr.in_type);
    k.y_type = static_cast<int>(pr.out_type);
    k.bias_type = pr.bias ? static_cast<int>(pr.bias_type) : -1;
    k.accumulate = accumulate;
    k.align_x = pointer_alignment(x);
    k.align_w = pointer_alignment(w);
    k.align_y = pointer_alignment(y);
    k.align_bias = pr.bias ? pointer_alignment(pr.bias) : 0;
    return k;
}

// Runs D = alpha·op(A)·op(B) + beta·C (+bias) when cuBLASLt supports it; `ran` says whether it did.
Status try_lt(const Context& ctx, const LtProblem& pr, float alpha, bool accumulate, const void* x,
              const void* w, void* y, bool& ran) {
    ran = false;
    LtDescs d;
    H3_TRY(make_descs(pr, d));
    GemmAlgo algo;
    const LtCall call{.alpha = alpha,
                      .accumulate = accumulate,
                      .x = x,
                      .w = w,
                      .y = y,
                      .y_bytes = static_cast<size_t>(pr.m * pr.n) * dtype_size(pr.out_type)};
    H3_TRY(find_algo(ctx, pr, make_key(pr, accumulate, x, w, y), d, call, algo));
    if (!algo.supported) return ok_status();
    const float beta = accumulate ? 1.0f : 0.0f;
    H3_TRY(cublas_status(cublasLtMatmul(static_cast<cublasLtHandle_t>(ctx.cuda->cublaslt()), d.op, &alpha, w,
                                        d.a, x, d.b, &beta, y, d.c, y, d.c, &algo.algo,
                                        ctx.cuda->gemm_workspace(), ctx.cuda->gemm_workspace_bytes(),
                                        stream_of(ctx)),
                         "cublasLtMatmul"));
    ran = true;
    return ok_status();
}

// y = t (+ bias) (+ old y), t the fp32 product: the fallback's single rounding.
template <typename TY>
__global__ void gemm_finish_kernel(const float* __restrict__ t, const void* __restrict__ bias, int bias_type,
                                   TY* __restrict__ y, int64_t m, int64_t n, bool accumulate) {
    const int64_t total = m * n;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float v = t[i];
        if (bias) v += load_any(bias, bias_type, i % n);
        if (accumulate) v += to_f32(y[i]);
        y[i] = from_f32<TY>(v);
    }
}

} // namespace

Status gemm(const Context& ctx, const GemmParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
            Tensor& y) {
    LtProblem pr;
    pr.k = x.dim(-1);
    pr.n = w.dim(0);
    pr.m = pr.k == 0 ? (pr.n == 0 ? 0 : y.numel() / pr.n) : x.numel() / pr.k;
    pr.in_type = x.dtype();
    pr.out_type = y.dtype();
    if (bias.defined()) pr.bias = bias.data(), pr.bias_type = bias.dtype();
    if (pr.m == 0 || pr.n == 0) return ok_status();

    if (pr.k > 0) {
        bool ran = false;
        H3_TRY(try_lt(ctx, pr, p.alpha, p.accumulate, x.data(), w.data(), y.data(), ran));
        if (ran) return ok_status();
    }

    // Fallback: fp32 product into scratch (no bias, no accumulate), then one finishing pass.
    const size_t bytes = static_cast<size_t>(pr.m * pr.n) * sizeof(float);
    H3_ASSIGN_OR_RETURN(void* tmp, ctx.cuda->scratch(bytes));
    if (pr.k > 0) {
        LtProblem f32 = pr;
        f32.out_type = DType::kF32;
        f32.bias = nullptr;
        bool ran = false;
        H3_TRY(try_lt(ctx, f32, p.alpha, false, x.data(), w.data(), tmp, ran));
        if (!ran)
            return unimplemented(std::string("CUDA gemm: cuBLASLt has no kernel for ") +
                                 dtype_name(pr.in_type) + " inputs");
    } else {
        H3_CUDA_TRY(cudaMemsetAsync(tmp, 0, bytes, stream_of(ctx)), "cudaMemsetAsync");
    }
    return dispatch_float(y.dtype(), [&](auto ty) {
        using TY = typename decltype(ty)::type;
        gemm_finish_kernel<TY><<<grid_for(pr.m * pr.n, 256), 256, 0, stream_of(ctx)>>>(
            static_cast<const float*>(tmp), pr.bias, static_cast<int>(pr.bias_type), y.data_as<TY>(), pr.m,
            pr.n, p.accumulate);
        return check_launch("gemm_finish");
    });
}

} // namespace h3::ops::cuda_impl
