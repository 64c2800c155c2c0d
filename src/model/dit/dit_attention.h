// How the 50 DiT blocks attend: dense (the base model) or FastH3's video sparse attention (spec §12,
// ops/vsa.h). The refiner always attends densely. Parsed from the CLI / server form `dense` or
// `vsa[:sparsity=0.9,mode=exempt|compete,dense_layers=0/1,dense_first_n_steps=1]`.
#pragma once

#include "core/status.h"

#include <string>
#include <vector>

namespace h3::model {

enum class VsaMode { kExempt, kCompete };

enum class VsaGateAdd { kFused, kSeparate };

struct VsaOptions {
    double sparsity = 0.9;           // fraction of video key tiles dropped, in [0, 1)
    VsaMode mode = VsaMode::kExempt; // exempt: prefix key tiles always kept; compete: they compete in top-k
    std::vector<int> dense_layers;   // blocks that keep every tile (the compression branch still runs)
    int dense_first_n_steps = 0;     // denoising steps (0-based index < n) that keep every tile
    // How a sparse gated block adds the compression branch (o += gate ⊙ oc): as its own pass after the
    // attention (separate, the default) or in the wgmma sparse kernels' epilogue (fused, where the kernel
    // runs; other kernels run the pass after; on an H100 on 2026-12-07 the fused add cost 1.37 ms in the e4m3
    // kernel against 0.56 ms for the pass, docs/fasth3-vsa.md). The same bytes either way; only the speed
    // differs.
    VsaGateAdd gate_add = VsaGateAdd::kSeparate;
};

struct AttentionChoice {
    enum class Kind { kDense, kVsa };
    Kind kind = Kind::kDense;
    VsaOptions vsa;
    bool is_vsa() const { return kind == Kind::kVsa; }
    // The sparsity block `layer` uses at denoising step `step` (0 = every tile kept).
    double layer_sparsity(int layer, int step) const;
    // "dense", "vsa(sparsity=0.9,mode=exempt)" (+ dense_layers / dense_first_n_steps / gate_add=fused when
    // set).
    std::string describe() const;
};

// Errors name the offending field (`--attention vsa:sparsity=1.2`: "sparsity 1.2 must lie in [0, 1)").
Result<AttentionChoice> parse_attention_choice(const std::string& spec);

} // namespace h3::model
