// cuDNN 9 fused flash attention through the backend graph API (no cudnn_frontend). Two graphs, tried in
// order for each new shape:
//  1. one CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR node (cuDNN >= 9.13): Q, K, V, O and a by-value scale;
//  2. the composite graph older runtimes fuse into the same flash kernel: S = Q·Kᵀ, S·scale, softmax as
//     max / sub / exp / sum / div, O = P·V (all intermediates virtual fp32).
// Q/K/V/O are [B·Sq or B·Sk, H, D] row-major (B sequences one after another, B = 1 but for batched calls);
// the descriptors give them as [B, H, S, D] with BSHD strides (b: S·H·D, h: D, s: H·D), so nothing is
// transposed. Plans are cached per shape and dtype in the CudaContext.
#include "core/one_time_work.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"

#include <array>
#include <chrono>

namespace h3::ops::cuda_detail {

namespace {

constexpr int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidScale = 5;

// Owns every descriptor created while building one plan; released unless handed to the AttentionPlan.
class Builder {
public:
    ~Builder() {
        for (auto it = descs_.rbegin(); it != descs_.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
    }
    std::vector<cudnnBackendDescriptor_t> release() { return std::move(descs_); }

    Status create(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t& out) {
        out = nullptr;
        H3_TRY(cudnn_status(cudnnBackendCreateDescriptor(type, &out), "create descriptor"));
        descs_.push_back(out);
        return ok_status();
    }

    static Status set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                      cudnnBackendAttributeType_t type, int64_t count, const void* value, const char* what) {
        return cudnn_status(cudnnBackendSetAttribute(d, name, type, count, value), what);
    }
    static Status set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                           cudnnBackendDescriptor_t value, const char* what) {
        return set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
    }

    Status tensor(int64_t uid, cudnnDataType_t type, std::array<int64_t, 4> dims,
                  std::array<int64_t, 4> strides, bool is_virtual, bool by_value,
                  cudnnBackendDescriptor_t& out) {
        H3_TRY(create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out));
        int64_t align = 16;
        H3_TRY(set(out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor type"));
        H3_TRY(set(out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), "tensor dims"));
        H3_TRY(set(out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "tensor strides"));
        H3_TRY(set(out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid"));
        H3_TRY(set(out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment"));
        bool v = is_virtual;
        H3_TRY(set(out, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v, "tensor virtual"));
        if (by_value) {
            bool bv = true;
            H3_TRY(set(out, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv, "tensor by value"));
        }
        return cudnn_status(cudnnBackendFinalize(out), "finalize tensor");
    }

    Status pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                     cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t& op) {
        cudnnBackendDescriptor_t pw;
        H3_TRY(create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, pw));
        cudnnDataType_t prec = CUDNN_DATA_FLOAT;
        H3_TRY(set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode"));
        H3_TRY(set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise prec"));
        H3_TRY(cudnn_status(cudnnBackendFinalize(pw), "finalize pointwise"));
        H3_TRY(create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise desc"));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise x"));
        if (b) H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, "pointwise b"));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise y"));
        return cudnn_status(cudnnBackendFinalize(op), "finalize pointwise op");
    }

    Status reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                     cudnnBackendDescriptor_t& op) {
        cudnnBackendDescriptor_t r;
        H3_TRY(create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, r));
        cudnnDataType_t prec = CUDNN_DATA_FLOAT;
        H3_TRY(set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode,
                   "reduction op"));
        H3_TRY(set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec, "reduction prec"));
        H3_TRY(cudnn_status(cudnnBackendFinalize(r), "finalize reduction"));
        H3_TRY(create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, op));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r, "reduction desc"));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, "reduction x"));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, "reduction y"));
        return cudnn_status(cudnnBackendFinalize(op), "finalize reduction op");
    }

    Status matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                  cudnnBackendDescriptor_t& op) {
        cudnnBackendDescriptor_t mm;
        H3_TRY(create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, mm));
        cudnnDataType_t prec = CUDNN_DATA_FLOAT;
        H3_TRY(set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec, "matmul prec"));
        H3_TRY(cudnn_status(cudnnBackendFinalize(mm), "finalize matmul"));
        H3_TRY(create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, op));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, "matmul a"));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b, "matmul b"));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, "matmul c"));
        H3_TRY(set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm, "matmul desc"));
        return cudnn_status(cudnnBackendFinalize(op), "finalize matmul op");
    }

private:
    std::vector<cudnnBackendDescriptor_t> descs_;
};

// kComposite keeps the softmax output P in fp32; kCompositeIoP stores it in the I/O dtype, the form some
// runtimes' fusion engine matches instead.
enum class Graph { kUnified, kComposite, kCompositeIoP };

const char* graph_name(Graph g) {
    switch (g) {
    case Graph::kUnified:
        return "sdpa_fwd";
    case Graph::kComposite:
        return "composite";
    default:
        return "composite(P in io dtype)";
    }
}

Status build_ops(Builder& b, Graph g, const AttentionKey& key, std::vector<cudnnBackendDescriptor_t>& ops) {
    const int64_t h = key.heads, sq = key.sq, sk = key.sk, d = key.dim, nb = key.batch;
    const cudnnDataType_t io =
        key.dtype == static_cast<int>(DType::kBF16) ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    cudnnBackendDescriptor_t q, v, o, scale;
    H3_TRY(b.tensor(kUidQ, io, {nb, h, sq, d}, {sq * h * d, d, h * d, 1}, false, false, q));
    H3_TRY(b.tensor(kUidV, io, {nb, h, sk, d}, {sk * h * d, d, h * d, 1}, false, false, v));
    H3_TRY(b.tensor(kUidO, io, {nb, h, sq, d}, {sq * h * d, d, h * d, 1}, false, false, o));
    H3_TRY(b.tensor(kUidScale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true, scale));
    if (g == Graph::kUnified) {
        cudnnBackendDescriptor_t k, op;
        H3_TRY(b.tensor(kUidK, io, {nb, h, sk, d}, {sk * h * d, d, h * d, 1}, false, false, k));
#if CUDNN_VERSION >= 91300
        H3_TRY(b.create(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, op));
        H3_TRY(Builder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q, "sdpa q"));
        H3_TRY(Builder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, k, "sdpa k"));
        H3_TRY(Builder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v, "sdpa v"));
        H3_TRY(Builder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o, "sdpa o"));
        H3_TRY(Builder::set_desc(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale, "sdpa scale"));
        H3_TRY(cudnn_status(cudnnBackendFinalize(op), "finalize sdpa_fwd op"));
        ops = {op};
        return ok_status();
#else
        return unimplemented("cuDNN headers older than 9.13 have no SDPA_FWD operation");
#endif
    }
    // Kᵀ as a [1, H, D, Sk] view of row-major K.
    cudnnBackendDescriptor_t kt;
    H3_TRY(b.tensor(kUidK, io, {nb, h, d, sk}, {sk * h * d, d, 1, h * d}, false, false, kt));
    auto full = [&](int64_t uid, cudnnBackendDescriptor_t& t) {
        return b.tensor(uid, CUDNN_DATA_FLOAT, {nb, h, sq, sk}, {h * sq * sk, sq * sk, sk, 1}, true, false,
                        t);
    };
    auto row = [&](int64_t uid, cudnnBackendDescriptor_t& t) {
        return b.tensor(uid, CUDNN_DATA_FLOAT, {nb, h, sq, 1}, {h * sq, sq, 1, 1}, true, false, t);
    };
    cudnnBackendDescriptor_t s, s2, mx, sub, ex, sum, p;
    H3_TRY(full(100, s));
    H3_TRY(full(101, s2));
    H3_TRY(row(102, mx));
    H3_TRY(full(103, sub));
    H3_TRY(full(104, ex));
    H3_TRY(row(105, sum));
    if (g == Graph::kCompositeIoP)
        H3_TRY(b.tensor(106, io, {nb, h, sq, sk}, {h * sq * sk, sq * sk, sk, 1}, true, false, p));
    else
        H3_TRY(full(106, p));
    cudnnBackendDescriptor_t bmm1, mul, rmax, psub, pexp, rsum, pdiv, bmm2;
    H3_TRY(b.matmul(q, kt, s, bmm1));
    H3_TRY(b.pointwise(CUDNN_POINTWISE_MUL, s, scale, s2, mul));
    H3_TRY(b.reduction(CUDNN_REDUCE_TENSOR_MAX, s2, mx, rmax));
    H3_TRY(b.pointwise(CUDNN_POINTWISE_SUB, s2, mx, sub, psub));
    H3_TRY(b.pointwise(CUDNN_POINTWISE_EXP, sub, nullptr, ex, pexp));
    H3_TRY(b.reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum, rsum));
    H3_TRY(b.pointwise(CUDNN_POINTWISE_DIV, ex, sum, p, pdiv));
    H3_TRY(b.matmul(p, v, o, bmm2));
    ops = {bmm1, mul, rmax, psub, pexp, rsum, pdiv, bmm2};
    return ok_status();
}

// "engine 12, knobs 2=1 14=3": which engine a config picked and its knob choices (for names and dedup).
std::string describe_config(cudnnBackendDescriptor_t cfg) {
    std::string out;
    cudnnBackendDescriptor_t engine = nullptr;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) == CUDNN_STATUS_SUCCESS) {
        int64_t n = 0;
        if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                     &engine) == CUDNN_STATUS_SUCCESS) {
            int64_t index = -1;
            if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                         &index) == CUDNN_STATUS_SUCCESS)
                out = "engine " + std::to_string(index);
        }
        cudnnBackendDestroyDescriptor(engine);
    }
    constexpr int kMaxKnobs = 16;
    std::array<cudnnBackendDescriptor_t, kMaxKnobs> knobs{};
    int created = 0;
    for (auto& k : knobs) {
        if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k) != CUDNN_STATUS_SUCCESS)
            break;
        ++created;
    }
    int64_t count = 0;
    if (created == kMaxKnobs &&
        cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 kMaxKnobs, &count, knobs.data()) == CUDNN_STATUS_SUCCESS &&
        count > 0) {
        out += ", knobs";
        for (int64_t i = 0; i < count && i < kMaxKnobs; ++i) {
            cudnnBackendKnobType_t type{};
            int64_t value = 0, n = 0;
            if (cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1,
                                         &n, &type) == CUDNN_STATUS_SUCCESS &&
                cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n,
                                         &value) == CUDNN_STATUS_SUCCESS)
                out += " " + std::to_string(static_cast<int>(type)) + "=" + std::to_string(value);
        }
    }
    for (int i = 0; i < created; ++i) cudnnBackendDestroyDescriptor(knobs[i]);
    return out;
}

const char* mode_name(cudnnBackendHeurMode_t m) {
    switch (m) {
    case CUDNN_HEUR_MODE_A:
        return "A";
    case CUDNN_HEUR_MODE_B:
        return "B";
    default:
        return "fallback";
    }
}

// Every execution plan heuristic `mode` offers for graph `g` (at most kMaxConfigs), in heuristic order.
// Each plan owns a Builder's descriptors (the graph is rebuilt per plan so each plan can live alone).
Status build_plans(const Context& ctx, Graph g, cudnnBackendHeurMode_t mode, const AttentionKey& key,
                   std::vector<std::shared_ptr<AttentionPlan>>& out) {
    constexpr int kMaxConfigs = 8;
    cudnnHandle_t handle = static_cast<cudnnHandle_t>(ctx.cuda->cudnn());
    Status last = internal_error(std::string("heuristic ") + mode_name(mode) + " offered no engine config");
    for (int i = 0; i < kMaxConfigs; ++i) {
        Builder b;
        std::vector<cudnnBackendDescriptor_t> ops;
        H3_TRY(build_ops(b, g, key, ops));
        cudnnBackendDescriptor_t graph;
        H3_TRY(b.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph));
        H3_TRY(Builder::set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                            static_cast<int64_t>(ops.size()), ops.data(), "graph ops"));
        H3_TRY(Builder::set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
                            "graph handle"));
        H3_TRY(cudnn_status(cudnnBackendFinalize(graph), "finalize operation graph"));
        cudnnBackendDescriptor_t heur;
        H3_TRY(b.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, heur));
        H3_TRY(Builder::set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heur graph"));
        H3_TRY(Builder::set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heur mode"));
        Status st = cudnn_status(cudnnBackendFinalize(heur), "finalize heuristics");
        if (!st.ok()) return out.empty() ? st : ok_status();
        std::array<cudnnBackendDescriptor_t, kMaxConfigs> cfgs{};
        for (auto& c : cfgs) H3_TRY(b.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, c));
        int64_t count = 0;
        st = cudnn_status(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxConfigs, &count,
                                                   cfgs.data()),
                          "heuristic results");
        if (!st.ok()) return out.empty() ? st : ok_status();
        if (i >= count) break;
        cudnnBackendDescriptor_t plan = nullptr;
        H3_TRY(cudnn_status(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan),
                            "create plan"));
        Status ps = Builder::set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
                                 "plan handle");
        if (ps.ok())
            ps = Builder::set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[i], "plan config");
        if (ps.ok()) ps = cudnn_status(cudnnBackendFinalize(plan), "finalize plan");
        int64_t ws = 0, n = 0;
        if (ps.ok())
            ps = cudnn_status(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                       CUDNN_TYPE_INT64, 1, &n, &ws),
                              "plan workspace");
        if (!ps.ok()) {
            cudnnBackendDestroyDescriptor(plan);
            last = ps;
            continue;
        }
        auto p = std::make_shared<AttentionPlan>();
        p->plan = plan;
        p->workspace = ws;
        p->info = std::string(graph_name(g)) + " graph, heuristic " + mode_name(mode) + " config " +
                  std::to_string(i) + "/" + std::to_string(count) + " (" + describe_config(cfgs[i]) +
                  "), workspace " + std::to_string(ws) + " B";
        p->config = std::string(graph_name(g)) + " " + describe_config(cfgs[i]);
        p->keep = b.release();
        out.push_back(std::move(p));
    }
    return out.empty() ? last : ok_status();
}

// Plans are built unrecorded first (ops/graph.h): a shape seen first under a recording gets none.
constexpr const char* kFirstSeenRecording =
    "the attention shape was first seen while recording a CUDA graph (run it once unrecorded first)";

// All distinct plans for `key` (graphs in order, heuristics A then B then fallback), cached.
const std::vector<std::shared_ptr<AttentionPlan>>&
candidates_locked(const Context& ctx, AttentionCache& cache, const AttentionKey& key, std::string& why) {
    auto it = cache.candidates.find(key);
    if (it != cache.candidates.end()) return it->second;
    static const std::vector<std::shared_ptr<AttentionPlan>> kNone;
    if (cuda_impl::stream_recording(ctx)) {
        why = kFirstSeenRecording;
        return kNone;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<AttentionPlan>> all;
    std::string errors;
    for (Graph g : {Graph::kUnified, Graph::kComposite, Graph::kCompositeIoP}) {
        for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
            std::vector<std::shared_ptr<AttentionPlan>> plans;
            Status st = build_plans(ctx, g, mode, key, plans);
            if (!st.ok())
                errors += std::string(errors.empty() ? "" : "; ") + graph_name(g) + "/" + mode_name(mode) +
                          ": " + st.message();
            for (auto& p : plans) {
                bool dup = false;
                for (const auto& q : all) dup = dup || q->config == p->config;
                if (!dup) all.push_back(std::move(p));
            }
        }
        if (!all.empty()) break; // the first graph cuDNN accepts; later graphs are fallbacks
    }
    if (all.empty()) why = errors;
    note_one_time({.attention_plans = 1,
                   .attention_plan_seconds =
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    return cache.candidates[key] = std::move(all);
}

} // namespace

std::vector<std::shared_ptr<AttentionPlan>>
cudnn_attention_candidates(const Context& ctx, const AttentionKey& key, std::string& why) {
    AttentionCache& cache = ctx.cuda->attention_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    return candidates_locked(ctx, cache, key, why);
}

std::shared_ptr<AttentionPlan> cudnn_attention_plan(const Context& ctx, const AttentionKey& key,
                                                    std::string& why) {
    AttentionCache& cache = ctx.cuda->attention_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.plans.find(key);
    if (it != cache.plans.end()) return it->second;
    if (cuda_impl::stream_recording(ctx)) {
        why = kFirstSeenRecording;
        return nullptr;
    }
    const auto& all = candidates_locked(ctx, cache, key, why);
    std::shared_ptr<AttentionPlan> result = all.empty() ? nullptr : all.front();
    if (result)
        log_info("attention: cuDNN " + std::to_string(cudnnGetVersion()) +
                 " fused attention plan for B=" + std::to_string(key.batch) +
                 " Sq=" + std::to_string(key.sq) + " Sk=" + std::to_string(key.sk) +
                 " H=" + std::to_string(key.heads) + " D=" + std::to_string(key.dim) + ": " + result->info +
                 " (" + std::to_string(all.size()) + " candidates)");
    cache.plans[key] = result;
    return result;
}

Status cudnn_attention_run(const Context& ctx, const AttentionPlan& plan, const void* q, const void* k,
                           const void* v, void* o, float scale) {
    void* ws = nullptr;
    if (plan.workspace > 0) {
        H3_ASSIGN_OR_RETURN(ws, ctx.cuda->scratch(static_cast<size_t>(plan.workspace)));
    }
    std::array<int64_t, 5> uids = {kUidQ, kUidK, kUidV, kUidO, kUidScale};
    std::array<void*, 5> ptrs = {const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), o, &scale};
    cudnnBackendDescriptor_t pack = nullptr;
    H3_TRY(cudnn_status(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack),
                        "variant pack"));
    Status st =
        Builder::set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 5, uids.data(), "pack uids");
    if (st.ok())
        st = Builder::set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 5, ptrs.data(),
                          "pack pointers");
    if (st.ok())
        st = Builder::set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws,
                          "pack workspace");
    if (st.ok()) st = cudnn_status(cudnnBackendFinalize(pack), "finalize variant pack");
    if (st.ok())
        st = cudnn_status(cudnnBackendExecute(static_cast<cudnnHandle_t>(ctx.cuda->cudnn()), plan.plan, pack),
                          "execute attention plan");
    cudnnBackendDestroyDescriptor(pack);
    return st;
}

} // namespace h3::ops::cuda_detail
