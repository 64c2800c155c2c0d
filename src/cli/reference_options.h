// The ref2va reference-size options `generate` and `serve` share.
#pragma once

#include <CLI/CLI.hpp>

namespace h3::cli {

// --reference-image-edge and --reference-video-edge (defaults and ranges: h3/defaults.h).
void add_reference_size_options(CLI::App* sub, int& image_edge, int& video_edge);

} // namespace h3::cli
