#include "core/log.h"

#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace h3 {

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
