#include "cli/app.h"

#include "cli/commands.h"
#include "cli/field_flags.h"
#include "core/log.h"
#include "core/strict_int.h"
#include "core/utf8.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace h3::cli {

namespace {

// Every integer option of every subcommand is parsed strictly (core/strict_int.h) before CLI11 converts it:
// CLI11 alone lets "-1" wrap into an unsigned option and saturates values past int64.
void make_integers_strict(CLI::App& app) {
    for (CLI::Option* opt : app.get_options()) {
        const std::string type = opt->get_type_name();
        const bool is_unsigned = type == "UINT";
        if (!is_unsigned && type != "INT") continue;
        const std::string name = opt->get_name();
        opt->check(CLI::Validator(
            [name, is_unsigned](std::string& v) {
                return is_unsigned ? strict_integer_error<uint64_t>(v, name)
                                   : strict_integer_error<int64_t>(v, name);
            },
            "", "strict integer"));
    }
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) make_integers_strict(*sub);
}

size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

// The first word that is neither an option nor --log-level's value, when it names no command: CLI11 alone
// would answer "A subcommand is required" without naming it.
std::optional<std::string> unknown_command(int argc, char** argv, CLI::App& app) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--log-level") {
            ++i;
            continue;
        }
        if (a.empty() || a[0] == '-') continue;
        for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
            if (sub->get_name() == a) return std::nullopt;
        return a;
    }
    return std::nullopt;
}

// The running program's name (the prefix of its messages).
std::string& current_program() {
    static std::string name = "h3-engine";
    return name;
}

int refuse_unknown_command(const std::string& word, CLI::App& app) {
    std::string nearest, names;
    size_t best = SIZE_MAX;
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        const std::string& name = sub->get_name();
        names += (names.empty() ? "" : ", ") + name;
        if (const size_t d = edit_distance(word, name); d < best) {
            best = d;
            nearest = name;
        }
    }
    std::fprintf(stderr, "%s: error: unknown command '%s' (did you mean '%s'?); the commands: %s\n",
                 program_name(), sanitized_utf8(word.substr(0, 80)).c_str(), nearest.c_str(), names.c_str());
    return kExitUsage;
}

int run_app(AppSpec& spec, int argc, char** argv) {
    CLI::App app{spec.description};
    app.set_version_flag("--version", spec.name + " " + H3_VERSION);
    app.require_subcommand(1);
    std::string log_level = "warn";
    app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")->capture_default_str();

    for (auto& c : spec.commands) c.setup(app);
    if (!spec.user_commands.empty())
        for (CLI::App* sub : app.get_subcommands([](CLI::App* s) { return !s->get_name().empty(); })) {
            const auto& user = spec.user_commands;
            const bool listed = std::find(user.begin(), user.end(), sub->get_name()) != user.end();
            sub->group(listed ? "Commands" : "Developer tools");
        }
    make_integers_strict(app);
    if (auto word = unknown_command(argc, argv, app)) return refuse_unknown_command(*word, app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int rc = app.exit(e);
        return rc == 0 ? kExitOk : kExitUsage;
    }
    if (!set_log_level(log_level)) {
        std::fprintf(stderr, "%s: --log-level '%s' is not one of trace|debug|info|warn|error|off\n",
                     program_name(), log_level.c_str());
        return kExitUsage;
    }
    for (auto& c : spec.commands)
        if (c.parsed()) return c.run();
    return kExitUsage;
}

} // namespace

const char* program_name() {
    return current_program().c_str();
}

// Nothing escapes as an exception (which would abort with 134): a stray one is a runtime failure, exit 4.
int run(AppSpec spec, int argc, char** argv) {
    current_program() = spec.name;
    try {
        return run_app(spec, argc, argv);
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "%s: error: out of memory\n", program_name());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: error: internal: %s\n", program_name(), e.what());
    } catch (...) {
        std::fprintf(stderr, "%s: error: internal: unknown exception\n", program_name());
    }
    return kExitRuntime;
}

int run(int argc, char** argv) {
    return run(engine_app(), argc, argv);
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
    case ErrorCode::kCancelled:
        return kExitCancelled;
    default:
        return kExitRuntime;
    }
}

int report(const Status& status) {
    const Status s = with_flag(status); // the field an error is about, as its flag
    if (!s.ok()) std::fprintf(stderr, "%s: error: %s\n", program_name(), s.to_string().c_str());
    return exit_code_for(s);
}

} // namespace h3::cli
