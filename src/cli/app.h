// The `h3-engine` command: subcommands registered in one place (app.cpp).
#pragma once

namespace h3::cli {

// Exit codes of every subcommand.
enum ExitCode : int {
    kExitOk = 0,
    kExitUsage = 2,
    kExitBadInput = 3,
    kExitRuntime = 4,
    kExitCancelled = 130
};

int run(int argc, char** argv);

} // namespace h3::cli
