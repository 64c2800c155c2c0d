// The embedded default model of `generate`: the trained demo checkpoint shipped in the source tree at
// models/h3-demo (tools/train_demo: a tiny model in the MiniMax-H3 architecture trained on procedural clips
// of moving shapes; not MiniMax-H3), with the native geometry its train_demo.json states.
#pragma once

#include "core/status.h"

#include <string>

namespace h3::cli {

struct DemoModel {
    std::string dir;              // the checkpoint root
    std::string size;             // its native canvas, "WxH"
    int frames = 0;               // its native frame count
    int reference_image_edge = 0; // the reference edge its ref2va task trained with
};

// The shipped demo model, or a not_found error naming where it was looked for and what to pass instead.
Result<DemoModel> embedded_demo_model();

} // namespace h3::cli
