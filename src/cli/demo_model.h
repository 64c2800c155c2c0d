// The embedded default model of `generate`: the trained demo checkpoint shipped in the source tree at
// models/h3-demo (tools/train_demo: a tiny model in the MiniMax-H3 architecture trained on procedural clips
// of moving shapes; not MiniMax-H3). Its native geometry and steps are its own h3_defaults.json
// (runtime/checkpoint_defaults.h), which the job builder applies to any request that leaves them out — with
// or without --model.
#pragma once

#include "core/status.h"
#include "runtime/checkpoint_defaults.h"

#include <string>

namespace h3::cli {

struct DemoModel {
    std::string dir;                      // the checkpoint root
    runtime::CheckpointDefaults defaults; // its h3_defaults.json
};

// The shipped demo model, or a not_found error naming where it was looked for and what to pass instead.
Result<DemoModel> embedded_demo_model();

} // namespace h3::cli
