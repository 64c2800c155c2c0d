// Where a buffer lives: the host or one CUDA device.
#pragma once

#include "core/status.h"

#include <cstdint>

#include <string>
#include <string_view>

namespace h3 {

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct Device {
    DeviceKind kind = DeviceKind::kCpu;
    int index = 0;

    static Device cpu() { return {}; }
    static Device cuda(int i = 0) { return {DeviceKind::kCuda, i}; }
    bool is_cpu() const { return kind == DeviceKind::kCpu; }
    bool is_cuda() const { return kind == DeviceKind::kCuda; }
    bool operator==(const Device&) const = default;
    std::string to_string() const; // "cpu", "cuda:0"
};

// Parses "cpu", "cuda", "cuda:N".
Result<Device> parse_device(std::string_view text);

} // namespace h3
