// What every bench takes from the command-line front end (src/cli): the subcommand record, the exit codes,
// the error report (the field an error is about shown as its flag), the device session and the memory flag
// family. h3-bench is one more front end over the same layers.
#pragma once

#include "cli/app.h"
#include "cli/commands.h"
#include "cli/device_setup.h"
#include "cli/residency_flags.h"

namespace h3::bench {

using cli::add_residency_flags;
using cli::Command;
using cli::DeviceSession;
using cli::kExitOk;
using cli::kExitRuntime;
using cli::kExitUsage;
using cli::report;
using cli::ResidencyFlags;
using cli::resolve_residency;
using cli::workload_for;

} // namespace h3::bench
