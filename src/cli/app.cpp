#include "cli/app.h"

#include "cli/commands.h"
#include "core/log.h"

#include <CLI/CLI.hpp>

#include <cstdio>

namespace h3::cli {

int run(int argc, char** argv) {
    CLI::App app{"h3-engine: native inference engine for MiniMax-H3 (joint video+audio diffusion)"};
    app.set_version_flag("--version", std::string("h3-engine ") + H3_VERSION);
    app.require_subcommand(1);
    std::string log_level = "warn";
    app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")->capture_default_str();

    std::vector<Command> commands = all_commands();
    for (auto& c : commands) c.setup(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int rc = app.exit(e);
        return rc == 0 ? kExitOk : kExitUsage;
    }
    if (!set_log_level(log_level)) {
        std::fprintf(stderr, "h3-engine: --log-level '%s' is not one of trace|debug|info|warn|error|off\n",
                     log_level.c_str());
        return kExitUsage;
    }
    for (auto& c : commands)
        if (c.parsed()) return c.run();
    return kExitUsage;
}

int exit_code_for(const Status& s) {
    switch (s.code()) {
    case ErrorCode::kOk:
        return kExitOk;
    case ErrorCode::kInvalidArgument:
        return kExitUsage;
    case ErrorCode::kBadInput:
    case ErrorCode::kNotFound:
        return kExitBadInput;
    default:
        return kExitRuntime;
    }
}

int report(const Status& s) {
    if (!s.ok()) std::fprintf(stderr, "h3-engine: error: %s\n", s.to_string().c_str());
    return exit_code_for(s);
}

} // namespace h3::cli
