// Kernel provenance (issue #45): which implementation each op family ran for a job, and no silent fallback.
// The thread that runs a job installs the job's record with a ProvenanceScope (as ops/cancel.h installs the
// cancel flag; runtime/device_group's rank threads inherit both); the dispatchers note what they chose:
//
//   dense_attention   cpu | cpu-e4m3 (fp8 simulated) | sm90a-wgmma-bf16 | sm90a-wgmma-e4m3 | cudnn | fallback
//   sparse_attention  cpu | cpu-e4m3 | sm90a-wgmma-bf16 | sm90a-wgmma-e4m3 | cuda-mma-sync-bf16 |
//                     cuda-mma-sync-f16 | cuda-simt; the wgmma ones + "+gate" where they ran VSA's gate add
//                     in their epilogue (ops/vsa.h: VsaFusedGateAdd)
//   gemm              <backend>-<dtype>: cpu-fp32, cpu-bf16, cpu-fp16, cpu-e4m3, cublaslt-bf16,
//   cublaslt-fp16,
//                     cublaslt-fp32, cublaslt-e4m3; int8-dequantized (W8A16 weights made bf16/fp16 per layer)
//   fp8_quantization  fused (the norms / SwiGLU write the e4m3 rows) | unfused (rows quantized on their own)
//   block_graphs      cpu | replay | record | host-launch (the DiT's blocks launched op by op)
//
// under the job's current stage (encode, denoise, decode: ProvenanceRecord::set_stage). A slower path than
// the job's settings ask for (the sparse kernel unavailable, fp8 quantization unfused because another
// setting needs the bf16 rows, no cuDNN plan) is a fallback: recorded with its reason and logged as ONE
// warning per job and reason. Without a scope nothing is recorded and a fallback is logged once per
// process and reason.
// The record also holds the job's one-time work (core/one_time_work.h): its scope installs that counter too.
#pragma once

#include "core/dtype.h"
#include "core/one_time_work.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace h3::ops {

enum class OpFamily { kDenseAttention, kSparseAttention, kGemm, kFp8Quantization, kBlockGraphs };
// dense_attention, sparse_attention, gemm, fp8_quantization, block_graphs
const char* op_family_name(OpFamily f);

struct Fallback {
    std::string stage, family, wanted, used, why;
};

// One job's record; thread-safe (a device group's ranks note into it at once).
class ProvenanceRecord {
public:
    void set_stage(std::string stage);
    void note(OpFamily f, std::string_view impl);
    // Returns true the first time this (family, why) is seen in this record (the caller logs then).
    bool fallback(OpFamily f, std::string_view wanted, std::string_view used, std::string_view why);

    // stage → family → implementation → host calls (a recorded block's replays call no op: its recording's
    // calls are counted once).
    using Calls = std::map<std::string, std::map<std::string, std::map<std::string, int64_t>>>;
    Calls calls() const;
    std::vector<Fallback> fallbacks() const;
    // The job's one-time work so far (GEMM tunings, attention plans, workspace allocations, recordings).
    OneTimeCounter& one_time() { return one_time_; }
    const OneTimeCounter& one_time() const { return one_time_; }

private:
    OneTimeCounter one_time_;
    mutable std::mutex m_;
    std::string stage_ = "job";
    Calls calls_;
    std::vector<Fallback> fallbacks_;
};

// Installs `record` as the calling thread's until destroyed, then restores the one before it (null keeps
// the enclosing one, as CancelScope does).
class ProvenanceScope {
public:
    explicit ProvenanceScope(ProvenanceRecord* record);
    ~ProvenanceScope();
    ProvenanceScope(const ProvenanceScope&) = delete;
    ProvenanceScope& operator=(const ProvenanceScope&) = delete;

private:
    ProvenanceRecord* previous_;
    OneTimeScope one_time_;
};

ProvenanceRecord* provenance_record(); // the calling thread's (nullptr outside every scope)

// Notes into the calling thread's record (nothing without one).
void note_impl(OpFamily f, std::string_view impl);
// A fallback: noted, and logged as a warning the first time per record (per process without one) and reason:
// "<family>: <used> instead of <wanted>: <why>".
void note_fallback(OpFamily f, std::string_view wanted, std::string_view used, std::string_view why);

// The GEMM name of a backend and element type: "cpu" / "cublaslt" + "-" + bf16 | fp16 | fp32 | e4m3.
std::string gemm_impl_name(bool cuda, std::string_view dtype);
std::string gemm_impl_name(bool cuda,
                           DType dtype); // the activation dtype: bf16 | fp16 | fp32 (else its name)

} // namespace h3::ops
