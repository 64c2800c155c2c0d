#include "core/log.h"
#include "ops/cuda/cuda_common.h"

namespace h3::ops::cuda_detail {

void log_warning(const std::string& message) {
    H3_LOG_WARN("{}", message);
}
void log_info(const std::string& message) {
    H3_LOG_INFO("{}", message);
}

} // namespace h3::ops::cuda_detail
