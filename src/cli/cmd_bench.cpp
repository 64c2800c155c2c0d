// h3-engine [--log-level L] bench ARGS...: the benchmarks are a program of their own, h3-bench (bench/),
// built beside h3-engine (its own target) and installed beside it; this command execs it as `h3-bench
// [--log-level L] ARGS...`, so the output, the errors and the exit code are h3-bench's (`h3-engine bench
// --help` is h3-bench's help).
#include "cli/app.h"
#include "cli/commands.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace h3::cli {

namespace {

// h3-bench in the folder of the running h3-engine (the build tree and an install both put it there).
std::filesystem::path bench_program() {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return (ec ? std::filesystem::current_path(ec) : self.parent_path()) / "h3-bench";
}

} // namespace

Command make_bench_command() {
    struct State {
        CLI::App* app = nullptr;
        CLI::App* sub = nullptr;
    };
    auto st = std::make_shared<State>();
    Command c;
    c.setup = [st](CLI::App& app) {
        st->app = &app;
        st->sub =
            app.add_subcommand("bench", "Benchmarks (runs h3-bench: `h3-engine bench --help` lists them)");
        st->sub->prefix_command(); // every argument after `bench` is h3-bench's, --help included
        st->sub->allow_extras();
        st->sub->set_help_flag();
    };
    c.parsed = [st] { return st->sub && st->sub->parsed(); };
    c.run = [st]() -> int {
        const std::filesystem::path program = bench_program();
        std::vector<std::string> args = {program.string()};
        if (const CLI::Option* log = st->app->get_option_no_throw("--log-level"); log && log->count() > 0) {
            args.push_back("--log-level");
            args.push_back(log->as<std::string>());
        }
        for (const std::string& a : st->sub->remaining()) args.push_back(a);
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::fflush(nullptr);
        execv(program.c_str(), argv.data());
        std::fprintf(
            stderr,
            "h3-engine: error: bench: cannot run %s (%s); the benchmarks are the h3-bench program, "
            "installed beside h3-engine: build it with `cmake --build BUILD_DIR --target h3-bench`\n",
            program.c_str(), std::strerror(errno));
        return kExitRuntime;
    };
    return c;
}

} // namespace h3::cli
