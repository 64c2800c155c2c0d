// H3_CHECK: always-on invariant check for programming errors (release builds too).
#pragma once

#include <sstream>
#include <string>

namespace h3::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);
}

#define H3_CHECK(cond, msg)                                                                                  \
    do {                                                                                                     \
        if (!(cond)) [[unlikely]] {                                                                          \
            std::ostringstream h3_check_os_;                                                                 \
            h3_check_os_ << msg;                                                                             \
            ::h3::detail::check_failed(__FILE__, __LINE__, #cond, h3_check_os_.str());                       \
        }                                                                                                    \
    } while (0)
