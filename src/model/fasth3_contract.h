// FastH3's inference contract: the sidecar `fastvideo_inference.json` a FastVideo FastH3 export carries at
// its root (schema `fasth3-inference-contract-v1`, spec §11.2). It declares the trained step ladder, the
// number of forwards and the attention the student was distilled with; it sets this engine's defaults for the
// checkpoint (steps and --attention), which a request may override.
//
// The trained schedule follows FastVideo's basic_fasth3 recipe and SGLang's FastH3 loader: the base
// shift-12/3 grid of num_inference_steps uniform points (5 points, 4 forwards: u = 1, 0.75, 0.5, 0.25, 0).
// The declared `dmd_denoising_steps` ([999, 749, 500, 250] in the release) are labels of those points, so
// each must lie within 1 of 1000·u; `grid_rungs` gives the points themselves for pipeline/schedule's rung
// schedule.
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace h3::model {

inline constexpr const char* kFastH3ContractFile = "fastvideo_inference.json";
inline constexpr const char* kFastH3Schema = "fasth3-inference-contract-v1";

struct FastH3Contract {
    std::vector<int> dmd_denoising_steps; // as declared, strictly decreasing in (0, 1000]
    std::vector<int> grid_rungs;          // the uniform grid's rungs (1000, 750, 500, 250 for 4 forwards)
    int transformer_forwards = 0;
    int num_inference_steps = 0;                    // grid points = forwards + 1
    bool vsa = false;                               // attention_backend VIDEO_SPARSE_ATTN_H3
    int vsa_tile_size = 0;                          // 64 (the only geometry served)
    double vsa_sparsity = 0.0;                      // the trained sparsity, in [0, 1)
    std::optional<double> video_shift, audio_shift; // when declared (must match the scheduler configs)
    std::string path;
};

// Reads `<root>/fastvideo_inference.json` (also beside a transformer folder given as `root`): nullopt when
// the checkpoint has none, an error naming the file and the field when it is malformed or declares what this
// engine does not serve (task other than t2av, CFG, a tile size other than 64, an unknown backend).
Result<std::optional<FastH3Contract>> read_fasth3_contract(const std::string& root);
// The same checks on parsed JSON (`origin` names the source in errors).
Result<FastH3Contract> parse_fasth3_contract(const nlohmann::json& j, const std::string& origin);

} // namespace h3::model
