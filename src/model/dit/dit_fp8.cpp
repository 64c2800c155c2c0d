#include "model/dit/dit_fp8.h"

#include "ops/gemm_fp8.h"

#include <cstdlib>
#include <set>
#include <string>

namespace h3::model {

namespace {

constexpr const char* kLayers[] = {
    "to_q", "to_k", "to_v", "to_out", "ff_in", "ff_out", "to_gate_compress", "attention", "*"};

// "blocks.N.LAYER" entries resolved to (block, layer) pairs against `blocks`.
Result<std::set<std::pair<int, std::string>>> parse_exceptions(const std::vector<std::string>& entries,
                                                               int blocks) {
    std::set<std::pair<int, std::string>> out;
    for (const std::string& e : entries) {
        const std::string prefix = "blocks.";
        const size_t dot = e.find('.', prefix.size());
        if (e.rfind(prefix, 0) != 0 || dot == std::string::npos)
            return invalid_argument("fp8 bf16 layer '" + e +
                                    "': expected blocks.N.LAYER (e.g. blocks.-1.ff_out)");
        const std::string num = e.substr(prefix.size(), dot - prefix.size()), layer = e.substr(dot + 1);
        char* end = nullptr;
        const long n = std::strtol(num.c_str(), &end, 10);
        if (num.empty() || *end != '\0' || n >= blocks || n < -blocks)
            return invalid_argument("fp8 bf16 layer '" + e + "': block index " + num + " is outside [-" +
                                    std::to_string(blocks) + ", " + std::to_string(blocks) + ")");
        bool known = false;
        for (const char* l : kLayers) known = known || layer == l;
        if (!known)
            return invalid_argument(
                "fp8 bf16 layer '" + e + "': layer '" + layer +
                "' is not one of to_q, to_k, to_v, to_out, ff_in, ff_out, to_gate_compress, "
                "attention, *");
        out.insert({static_cast<int>(n < 0 ? n + blocks : n), layer});
    }
    return out;
}

} // namespace

Status quantize_dit_fp8(const ops::Context& ctx, const DitConfig& config, const DitFp8Options& options,
                        DitWeights& weights) {
    const int blocks = static_cast<int>(weights.blocks.size());
    H3_ASSIGN_OR_RETURN(auto keep, parse_exceptions(options.bf16_layers, blocks));
    auto kept = [&](int b, const char* layer) { return keep.count({b, layer}) || keep.count({b, "*"}); };
    for (int b = 0; b < blocks; ++b) {
        DitBlockWeights& w = weights.blocks[static_cast<size_t>(b)];
        struct Item {
            const char* name;
            Tensor* bf16;
            ops::Fp8Weight* fp8;
        } items[] = {{"to_q", &w.to_q, &w.fp8.to_q},
                     {"to_k", &w.to_k, &w.fp8.to_k},
                     {"to_v", &w.to_v, &w.fp8.to_v},
                     {"to_out", &w.to_out, &w.fp8.to_out},
                     {"ff_in", &w.ff_in, &w.fp8.ff_in},
                     {"ff_out", &w.ff_out, &w.fp8.ff_out},
                     {"to_gate_compress", &w.gate_compress, &w.fp8.gate_compress}}; // FastH3 (VSA) only
        for (Item& it : items) {
            *it.fp8 = {};
            if (kept(b, it.name) || !it.bf16->defined()) continue;
            H3_ASSIGN_OR_RETURN(*it.fp8, ops::quantize_weight_fp8(ctx, *it.bf16));
            if (!options.keep_bf16) *it.bf16 = Tensor();
        }
        w.fp8.attention = config.attention_head_dim == 128 && !kept(b, "attention");
        w.fp8.gemm = {.fast_accum = options.fast_accum};
        w.fp8.fused_inputs = options.fused_quantization;
    }
    return ok_status();
}

} // namespace h3::model
