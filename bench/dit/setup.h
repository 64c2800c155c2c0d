// `bench dit`'s model: `blocks` blocks of the config's DiT with random full-width weights generated on the
// device, placed as the memory flags (or the budget's plan) say, quantized to e4m3 with --precision fp8, and
// the synthetic request's packed inputs and AdaLN tables. With --sp/--tp/--ring 1 a DeviceGroup of one rank
// whose DiT view takes the sequence-parallel code path.
#pragma once

#include "bench/dit/options.h"
#include "model/dit/dit_model.h"
#include "model/dit/dit_random.h"
#include "runtime/device_group.h"

#include <memory>
#include <string>

namespace h3::bench {

struct DitBench {
    std::unique_ptr<DeviceSession> session;
    std::unique_ptr<runtime::DeviceGroup> group; // --sp/--ring 1 (null: the plain path)
    model::DitConfig config;                     // the full config (per-forward figures extrapolate to it)
    model::SyntheticLayout layout;
    std::string precision_text; // --precision, else --dtype
    model::DitPrecision precision = model::DitPrecision::kBf16;
    int blocks = 0; // blocks instantiated and timed
    model::AttentionChoice attention;
    runtime::ResidencyChoice placement;
    std::unique_ptr<model::DitModel> dit; // holds the `blocks` blocks
    model::DitPackedInputs packed;
    model::AdalnTables tables;
    std::shared_ptr<const ops::VsaTiles> vsa_tiles; // --attention vsa: the layout's tile map
    size_t weight_bytes = 0;                        // device bytes after the weights and tables

    const ops::Context& ctx() const { return session->context(); }
    bool fp8() const { return precision == model::DitPrecision::kFp8; }
    int64_t rows() const { return packed.rows; }
    const model::DitParallel* group_dit() const { return group ? &group->rank(0).dit : nullptr; }
};

Result<DitBench> make_dit_bench(const DitBenchOptions& options);

// Block GEMM parameters (q, k, v, out, fc1, fc2): 385.35 M at the official width.
double block_gemm_params(const model::DitConfig& c);

} // namespace h3::bench
