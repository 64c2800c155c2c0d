#include "cli/reference_options.h"

namespace h3::cli {

void add_reference_size_options(CLI::App* sub, int& image_edge, int& video_edge) {
    sub->add_option("--reference-image-edge", image_edge,
                    "ref2va: short edge image references are resized to (the model's is 2048; smaller is a "
                    "reduced-cost mode that changes the result)")
        ->check(CLI::Range(32, 8192))
        ->capture_default_str();
    sub->add_option(
           "--reference-video-edge", video_edge,
           "ref2va: short edge of the canvas video references are put on (the model's is 768; smaller "
           "is a reduced-cost mode that changes the result)")
        ->check(CLI::Range(32, 2048))
        ->capture_default_str();
}

} // namespace h3::cli
