#include "core/log.h"

#include "core/check.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace h3 {

namespace {
// Log lines go to stderr (spdlog's default logger writes to stdout): stdout carries the programs' data —
// --json reports, --progress json events, inspect listings — which a log line there would corrupt. Set when
// this file's object is linked in (every program of the engine), before main.
const bool kLogsOnStderr = [] {
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
    return true;
}();
} // namespace

bool set_log_level(const std::string& level) {
    auto parsed = spdlog::level::from_str(level);
    if (parsed == spdlog::level::off && level != "off") return false;
    spdlog::set_level(parsed);
    return true;
}

namespace detail {
void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
    std::fprintf(stderr, "h3-engine: internal check failed at %s:%d: (%s) %s\n", file, line, cond,
                 msg.c_str());
    std::fflush(stderr);
    std::abort();
}
} // namespace detail

} // namespace h3
