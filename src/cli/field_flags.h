// The CLI's names for the job builder's fields: an error about field `num_inference_steps` reads "--steps
// ..." on the command line (pipeline errors name fields, never flags).
#pragma once

#include "core/status.h"

#include <string>

namespace h3::cli {

// The flag of a job field ("size" → "--size", "num_inference_steps" → "--steps"); "" when it has none.
std::string flag_for_field(const std::string& field);
// `s` with its leading field name replaced by the field's flag.
Status with_flag(const Status& s, const std::string& field);

} // namespace h3::cli
