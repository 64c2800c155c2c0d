#include "cli/reference_options.h"

#include <h3/defaults.h>

namespace h3::cli {

void add_reference_size_options(CLI::App* sub, int& image_edge, int& video_edge) {
    sub->add_option("--reference-image-edge", image_edge,
                    "ref2va: image references' short edge (smaller: reduced cost, other results)")
        ->check(CLI::Range(kReferenceEdgeMin, kReferenceImageEdgeMax))
        ->capture_default_str();
    sub->add_option("--reference-video-edge", video_edge,
                    "ref2va: video references' canvas short edge (smaller: reduced cost, other results)")
        ->check(CLI::Range(kReferenceEdgeMin, kReferenceVideoEdgeMax))
        ->capture_default_str();
}

} // namespace h3::cli
