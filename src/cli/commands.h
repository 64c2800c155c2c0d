// Subcommand registry. Each subcommand lives in cmd_<name>.cpp and exposes a factory here; `h3-engine`'s list
// is commands.cpp's, `h3-bench`'s bench/commands.cpp's, and one driver (app.cpp) runs either.
#pragma once

#include "core/status.h"

#include <functional>
#include <string>
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

// A program of subcommands: its name (the prefix of its messages), --help's first line, the commands in
// --help's order, and the ones --help lists under "Commands" (the others under "Developer tools"; none
// named: no groups).
struct AppSpec {
    std::string name, description;
    std::vector<Command> commands;
    std::vector<std::string> user_commands;
};

// h3-engine's commands: the user's (generate, serve, encode, decode, compare, inspect), then the developer
// tools (make-tiny, dit, bench: forwarded to h3-bench).
AppSpec engine_app();
// Parses the command line against `spec` (--version, --log-level, strict integers) and runs the command
// given; returns its ExitCode. No exception escapes.
int run(AppSpec spec, int argc, char** argv);
// The running program's name ("h3-engine" or "h3-bench").
const char* program_name();

// Maps a Status to the exit code (invalid_argument → 2, bad_input/not_found → 3, else 4).
int exit_code_for(const Status& s);
// Prints "PROGRAM: error: ..." (the error's field as its flag) for a non-OK status and returns its exit code.
int report(const Status& s);

} // namespace h3::cli
