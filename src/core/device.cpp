#include "core/device.h"

#include <charconv>

namespace h3 {

std::string Device::to_string() const {
    return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Result<Device> parse_device(std::string_view text) {
    if (text == "cpu") return Device::cpu();
    if (text == "cuda") return Device::cuda(0);
    if (text.starts_with("cuda:")) {
        std::string_view num = text.substr(5);
        int idx = -1;
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), idx);
        if (ec == std::errc() && p == num.data() + num.size() && idx >= 0) return Device::cuda(idx);
    }
    return invalid_argument("device '" + std::string(text) + "' is not one of cpu, cuda, cuda:N");
}

} // namespace h3
