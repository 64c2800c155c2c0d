// Few-step sampling presets for the published step-distilled (Turbo) LoRAs: the grid-point count and the
// video/audio shifts each adapter was trained with (ModelTC/Minimax-H3-Turbo README "Model specs"; the
// sampler is the base one with N = NFE + 1 grid points, spec §11.1). The adapter itself is still given with
// --lora.
#pragma once

#include <string>
#include <vector>

namespace h3::pipeline {

struct FewStepPreset {
    std::string name; // turbo-4step-768p, ...
    int steps = 0;    // grid points, terminal 0 included (NFE + 1)
    double video_shift = 0, audio_shift = 0;
    std::string adapter; // which published file(s) it was trained for
    std::string source;  // where the adapter and these numbers are published
};

const std::vector<FewStepPreset>& few_step_presets();
// nullptr for an unknown name.
const FewStepPreset* find_few_step_preset(const std::string& name);
// One line per preset, for --help.
std::string few_step_presets_help();

} // namespace h3::pipeline
