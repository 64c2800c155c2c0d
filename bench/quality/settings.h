// The acceleration settings `h3-engine bench quality` measures against the lossless reference, each one
// knob away from it (the same request otherwise), and the fixed prompt set it runs them on.
//
// Reference: no step cache, dense attention, native weights, the reference dtype (--dtype, fp32 by
// default). A setting changes one of: the step cache (a quality preset or a cache spec: DBCache with the
// high preset's F1B0, TaylorSeer, the SCM presets, Cache-DiT's defaults, TeaCache with the FL2VA set,
// velocity reuse), the weights (int8), the precision (bf16, fp16, fp8) or the attention (VSA sparsities).
// `flags` is what `generate` takes for the setting, so a row can be reproduced by hand.
#pragma once

#include "core/status.h"
#include "io/image_reader.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h3::bench {

struct QualitySetting {
    std::string name = {};  // what --settings selects: lossless, high, int8, vsa-0.9, ...
    std::string group = {}; // reference | cache | weights | precision | attention
    std::string flags = {}; // the `generate` flags that give it ("" for the reference itself)
    // Job fields ("" : as the reference).
    std::string cache = {}, quality = {}, attention = {};
    std::string weight_dtype = {};          // "" | int8
    std::string dtype = {}, precision = {}; // "" : the reference's dtype; precision "" | fp8
};

// Every setting, in table order. `lossless` (first) runs the reference's request again: its row must be
// exact (PSNR and SNR +inf, SSIM 1, cosine 1).
const std::vector<QualitySetting>& all_quality_settings();

// "all" (or empty): every setting; else a comma-separated list of names, kept in table order. An unknown
// name is an invalid_argument naming it and the known ones (field `--settings`).
Result<std::vector<QualitySetting>> select_quality_settings(const std::string& names);

// One request of the prompt set: a caption (t2va), or a caption with a first keyframe made in code (fl2va).
struct QualityCase {
    std::string name = {};
    std::string task = {}; // t2va | fl2va
    std::string prompt = {};
    uint64_t seed = 0;
};

// ball, square (t2va), keyframe (fl2va).
const std::vector<QualityCase>& all_quality_cases();
Result<std::vector<QualityCase>> select_quality_cases(const std::string& names);

// The fl2va case's first keyframe, width x height: the demo model's yellow ball, centred on its dark
// background (deterministic, integer arithmetic).
io::DecodedImage quality_keyframe(int width, int height);

} // namespace h3::bench
