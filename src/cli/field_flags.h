// The CLI's names for the engine's options and the job builder's fields: an error whose Status::field is
// `num_inference_steps` reads "--steps ..." on the command line (errors below the CLI name fields, never
// flags). report() (cli/commands.h) applies it to every error it prints.
#pragma once

#include "core/status.h"

#include <string>

namespace h3::cli {

// The flag of a field ("size" → "--size", "num_inference_steps" → "--steps"); "" when it has none.
std::string flag_for_field(const std::string& field);
// `s` with its leading field name (Status::field) replaced by the field's flag, or the flag prefixed when the
// message does not start with the field's name.
Status with_flag(const Status& s);
// The same for a status whose field came separately (`field` wins when not empty).
Status with_flag(const Status& s, const std::string& field);

} // namespace h3::cli
