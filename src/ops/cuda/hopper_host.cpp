// Host side of the Hopper kernels: tensor maps (cuTensorMapEncodeTiled through the runtime's driver entry
// point, no libcuda link) and the check that this build and device can run sm_90a code.
#include "ops/cuda/attention_hopper.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/tensor_map.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <mutex>

namespace h3::ops::cuda_detail {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn(Status& why) {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    static Status status = ok_status();
    static std::once_flag once;
    std::call_once(once, [] {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q{};
        cudaError_t e =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p)
            status = internal_error("CUDA driver has no cuTensorMapEncodeTiled (driver too old for TMA)");
        fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    });
    why = status;
    return fn;
}

} // namespace

Status make_tensor_map(CUtensorMap& map, CUtensorMapDataType type, const void* base, const TmaDims& d) {
    Status why;
    auto fn = encode_fn(why);
    if (!fn) return why;
    cuuint64_t dims[5], strides[4];
    cuuint32_t box[5], estr[5];
    for (int i = 0; i < d.rank; ++i) {
        dims[i] = d.dims[i];
        box[i] = d.box[i];
        estr[i] = 1;
        if (i + 1 < d.rank) strides[i] = d.strides[i];
    }
    CUresult r = fn(&map, type, static_cast<cuuint32_t>(d.rank), const_cast<void*>(base), dims, strides, box,
                    estr, CU_TENSOR_MAP_INTERLEAVE_NONE, d.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return internal_error("cuTensorMapEncodeTiled failed (CUresult " +
                              std::to_string(static_cast<int>(r)) + ") for a rank-" + std::to_string(d.rank) +
                              " map");
    return ok_status();
}

bool hopper_kernels_usable(const Context& ctx) {
#ifdef H3_HAS_SM90A
    return ctx.is_cuda() && ctx.cuda && ctx.cuda->cc_major() == 9;
#else
    (void)ctx;
    return false;
#endif
}

bool hopper_attention_shape_ok(const HopperAttentionArgs& a) {
    constexpr int64_t kMax = int64_t(1) << 30;
    if (a.dim != 64 && a.dim != 128) return false;
    if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads) return false;
    if (a.sq <= 0 || a.sk <= 0 || a.sq > kMax || a.sk > kMax || a.heads > 65535) return false;
    if (a.batch < 1 || a.batch > 65535 || a.sq % a.batch || a.sk % a.batch) return false;
    if (a.causal && (a.sq != a.sk || a.batch != 1 || a.dim != 128)) return false;
    for (const void* p : {a.q, a.k, a.v, static_cast<const void*>(a.o)})
        if (pointer_alignment(p) < 16) return false;
    return a.scale > 0.0f;
}

} // namespace h3::ops::cuda_detail
