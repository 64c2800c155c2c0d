// H3_VAE_PROFILE=1: wall time per phase of the video VAE's decode and encode. Each mark synchronizes the
// stream, so the phases add up exactly (the profiled run is a little slower than a plain one); print()
// writes them to stderr ("vae profile <label> <phase> <seconds>") and starts over. Off: every call is a
// load and a return.
#pragma once

#include "ops/context.h"

#include <string>

namespace h3::model::vae_profile {

bool on();
// The time since the previous mark goes to `phase` (nullptr: dropped, the clock restarts).
void mark(const ops::Context& ctx, const char* phase);
void mark(const ops::Context& ctx, const std::string& phase);
void print(const char* label);

} // namespace h3::model::vae_profile
