// Subcommand registry. Each subcommand lives in cmd_<name>.cpp and exposes a factory here.
#pragma once

#include "core/status.h"

#include <functional>
#include <vector>

namespace CLI {
class App;
}

namespace h3::cli {

struct Command {
    std::function<void(CLI::App&)> setup; // adds the subcommand and its options
    std::function<bool()> parsed;         // was this subcommand given?
    std::function<int()> run;             // runs it; returns an ExitCode
};

std::vector<Command> all_commands();

// Maps a Status to the exit code (invalid_argument → 2, bad_input/not_found → 3, else 4).
int exit_code_for(const Status& s);
// Prints "h3-engine: error: ..." for a non-OK status and returns its exit code.
int report(const Status& s);

} // namespace h3::cli
