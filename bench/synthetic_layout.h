// The synthetic t2va request the DiT benches time (`bench dit`, `bench fp8`): a --size canvas (multiples of
// 32), --frames pixel frames (17n+5) and --text conditioner rows, as model::SyntheticLayout.
#pragma once

#include "core/status.h"
#include "model/dit/dit_random.h"

#include <h3/defaults.h>

#include <string>

namespace h3::bench {

// The release canvas as --size takes it: "1344x768" (h3/defaults.h).
std::string release_size();

Result<model::SyntheticLayout> synthetic_layout(const std::string& size, int frames, int64_t text_rows);

} // namespace h3::bench
