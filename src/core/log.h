// Logging through spdlog. One logger for the whole process; level set by the CLI (--log-level).
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace h3 {
// Accepts trace|debug|info|warn|error|off. Returns false for an unknown name.
bool set_log_level(const std::string& level);
} // namespace h3

#define H3_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define H3_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define H3_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define H3_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
