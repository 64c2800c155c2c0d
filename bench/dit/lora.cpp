#include "bench/dit/lora.h"

#include "core/cuda_api.h"
#include "model/lora/lora_random.h"
#include "model/lora/lora_set.h"

#include <chrono>

namespace h3::bench {

Result<nlohmann::json> bench_dit_lora(model::DitModel& dit, const BenchLoraParams& p,
                                      const BlockTimer& time) {
    const model::DitConfig& c = dit.config();
    const auto t_make = std::chrono::steady_clock::now();
    H3_ASSIGN_OR_RETURN(model::LoraAdapter host,
                        model::random_lora_adapter(
                            c, {.rank = p.rank, .blocks = p.blocks, .dtype = dit.act_dtype(), .seed = 77}));
    const double make_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_make).count();
    const std::vector<model::LoraUse> uses = {
        {std::make_shared<const model::LoraAdapter>(std::move(host)), 1.0f}};
    // GEMM work the adapters add per block: 2·S·r·(in + out) for each of the six targets.
    double lora_params = 0;
    for (const auto& f : uses[0].adapter->factors)
        if (f.target.index == 0) lora_params += static_cast<double>(f.a.numel() + f.b.numel());
    nlohmann::json j = {{"rank", p.rank},
                        {"targets_per_block", 6},
                        {"host_adapter_bytes", uses[0].adapter->host_bytes()},
                        {"make_seconds", make_s},
                        {"extra_gflop_per_block", 2.0 * static_cast<double>(p.rows) * lora_params / 1e9},
                        {"base_seconds_per_block", p.base_seconds_per_block}};
    if (p.mode != "merged") {
        H3_ASSIGN_OR_RETURN(auto set, model::LoraSet::build(uses, c, dit.context(), dit.act_dtype()));
        model::DitForwardOptions fo;
        fo.lora = set.get();
        H3_ASSIGN_OR_RETURN(model::DitScratch sc,
                            dit.make_scratch(p.rows, fo.ffn_chunk_bytes, set->max_rank()));
        H3_ASSIGN_OR_RETURN(double s, time(fo, sc, true));
        j["runtime_seconds_per_block"] = s;
        j["runtime_seconds_per_forward_50_blocks"] = s * c.num_layers;
        j["runtime_overhead"] = s / p.base_seconds_per_block - 1.0;
        j["runtime_device_bytes"] = set->device_bytes();
        j["peak_device_bytes_runtime"] = device_memory_stats().peak;
    }
    if (p.mode != "runtime") {
        const auto t0 = std::chrono::steady_clock::now();
        H3_TRY(dit.merge_adapters(uses));
        if (!dit.context().device.is_cpu()) H3_TRY(cuda::device_synchronize());
        const double merge_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        model::DitForwardOptions fo;
        H3_ASSIGN_OR_RETURN(model::DitScratch sc, dit.make_scratch(p.rows, fo.ffn_chunk_bytes));
        H3_ASSIGN_OR_RETURN(double s, time(fo, sc, true));
        j["merge_seconds"] = merge_s;
        j["merged_seconds_per_block"] = s;
        j["merged_seconds_per_forward_50_blocks"] = s * c.num_layers;
        j["merged_overhead"] = s / p.base_seconds_per_block - 1.0;
    }
    return j;
}

} // namespace h3::bench
