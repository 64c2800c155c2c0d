// The link's own host-to-device rate for `bench dit`'s streamed weights: one block's bytes copied from
// pinned and from pageable host memory.
#pragma once

#include "core/status.h"
#include "ops/ops.h"

#include <cstddef>

namespace h3::bench {

// Seconds for copying `bytes` from host memory (pinned or pageable) to the device on a stream of its own,
// after one untimed copy (0 on the CPU).
Result<double> h2d_seconds(const ops::Context& ctx, size_t bytes, bool pinned);

} // namespace h3::bench
