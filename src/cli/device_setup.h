// The CLI's devices: runtime::DeviceSession (a --device string as an op context).
#pragma once

#include "runtime/device_session.h"

namespace h3::cli {

using runtime::DeviceSession;

} // namespace h3::cli
