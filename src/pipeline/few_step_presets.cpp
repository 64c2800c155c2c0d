#include "pipeline/few_step_presets.h"

#include <cstdio>

namespace h3::pipeline {

namespace {

// Numbers from the "Model specs" table of github.com/ModelTC/Minimax-H3-Turbo (training shifts video/audio,
// distillation NFE); the files are on huggingface.co/lightx2v/Minimax-h3-Turbo.
const char* kModelTc =
    "huggingface.co/lightx2v/Minimax-h3-Turbo (specs: github.com/ModelTC/Minimax-H3-Turbo)";

} // namespace

const std::vector<FewStepPreset>& few_step_presets() {
    static const std::vector<FewStepPreset> presets = {
        {"turbo-4step-544p", 5, 12.0, 3.0, "minimax_h3_fl2v_turbo_4step_v0.1 (FL2VA/T2VA, 544p mixed aspect)",
         kModelTc},
        {"turbo-8step-544p", 9, 12.0, 3.0, "minimax_h3_fl2v_turbo_8step_v1.0 (FL2VA/T2VA, 544p mixed aspect)",
         kModelTc},
        {"turbo-4step-768p", 5, 6.0, 3.0, "minimax_h3_fl2v_turbo_4step_v1.0_768p (FL2VA/T2VA, 1344x768)",
         kModelTc},
        {"turbo-8step-768p", 9, 6.0, 3.0, "minimax_h3_fl2v_turbo_8step_v1.0_768p (FL2VA/T2VA, 1344x768)",
         kModelTc},
        {"ref-turbo-4step-544p", 5, 12.0, 3.0,
         "minimax_h3_ref2v_turbo_4step_v0.1 (Ref2VA, 544p mixed aspect)", kModelTc},
    };
    return presets;
}

const FewStepPreset* find_few_step_preset(const std::string& name) {
    for (const auto& p : few_step_presets())
        if (p.name == name) return &p;
    return nullptr;
}

std::string few_step_presets_help() {
    std::string s;
    char buf[256];
    for (const auto& p : few_step_presets()) {
        std::snprintf(buf, sizeof buf, "  %-21s %d steps (%d forwards), shifts %g/%g: %s\n", p.name.c_str(),
                      p.steps, p.steps - 1, p.video_shift, p.audio_shift, p.adapter.c_str());
        s += buf;
    }
    return s + "  (adapters: " + kModelTc + ")";
}

} // namespace h3::pipeline
