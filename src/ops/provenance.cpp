#include "ops/provenance.h"

#include "core/log.h"

#include <set>
#include <utility>

namespace h3::ops {

namespace {
thread_local ProvenanceRecord* t_record = nullptr;
} // namespace

const char* op_family_name(OpFamily f) {
    switch (f) {
    case OpFamily::kDenseAttention:
        return "dense_attention";
    case OpFamily::kSparseAttention:
        return "sparse_attention";
    case OpFamily::kGemm:
        return "gemm";
    case OpFamily::kFp8Quantization:
        return "fp8_quantization";
    case OpFamily::kBlockGraphs:
        return "block_graphs";
    }
    return "unknown";
}

void ProvenanceRecord::set_stage(std::string stage) {
    std::lock_guard<std::mutex> lk(m_);
    stage_ = std::move(stage);
}

void ProvenanceRecord::note(OpFamily f, std::string_view impl) {
    std::lock_guard<std::mutex> lk(m_);
    ++calls_[stage_][op_family_name(f)][std::string(impl)];
}

bool ProvenanceRecord::fallback(OpFamily f, std::string_view wanted, std::string_view used,
                                std::string_view why) {
    std::lock_guard<std::mutex> lk(m_);
    ++calls_[stage_][op_family_name(f)][std::string(used)];
    for (const Fallback& b : fallbacks_)
        if (b.family == op_family_name(f) && b.why == why) return false;
    fallbacks_.push_back(
        {stage_, op_family_name(f), std::string(wanted), std::string(used), std::string(why)});
    return true;
}

ProvenanceRecord::Calls ProvenanceRecord::calls() const {
    std::lock_guard<std::mutex> lk(m_);
    return calls_;
}

std::vector<Fallback> ProvenanceRecord::fallbacks() const {
    std::lock_guard<std::mutex> lk(m_);
    return fallbacks_;
}

ProvenanceScope::ProvenanceScope(ProvenanceRecord* record)
    : previous_(t_record), one_time_(record ? &record->one_time() : nullptr) {
    if (record) t_record = record;
}

ProvenanceScope::~ProvenanceScope() {
    t_record = previous_;
}

ProvenanceRecord* provenance_record() {
    return t_record;
}

void note_impl(OpFamily f, std::string_view impl) {
    if (t_record) t_record->note(f, impl);
}

void note_fallback(OpFamily f, std::string_view wanted, std::string_view used, std::string_view why) {
    bool first = false;
    if (t_record) {
        first = t_record->fallback(f, wanted, used, why);
    } else { // no job: once per process and reason
        static std::mutex m;
        static std::set<std::pair<std::string, std::string>> seen;
        std::lock_guard<std::mutex> lk(m);
        first = seen.emplace(op_family_name(f), std::string(why)).second;
    }
    if (first)
        H3_LOG_WARN("{}: {} instead of {}: {}", op_family_name(f), std::string(used), std::string(wanted),
                    std::string(why));
}

std::string gemm_impl_name(bool cuda, std::string_view dtype) {
    return std::string(cuda ? "cublaslt-" : "cpu-") + std::string(dtype);
}

std::string gemm_impl_name(bool cuda, DType dtype) {
    switch (dtype) {
    case DType::kBF16:
        return gemm_impl_name(cuda, "bf16");
    case DType::kF16:
        return gemm_impl_name(cuda, "fp16");
    case DType::kF32:
        return gemm_impl_name(cuda, "fp32");
    default:
        return gemm_impl_name(cuda, dtype_name(dtype));
    }
}

} // namespace h3::ops
