#include "cli/vsa_flags.h"

namespace h3::cli {

void add_attention_option(CLI::App* sub, std::string& attention) {
    sub->add_option(
        "--attention", attention,
        "dense | vsa[:sparsity=0.9,...] (default: the checkpoint's fastvideo_inference.json, else "
        "dense)");
}

void attention_input(const std::string& attention, pipeline::JobInput& in) {
    if (!attention.empty()) in.attention = attention;
}

const char* rungs_note(const pipeline::GenerationJob& job) {
    return job.rungs.empty() ? "" : ", FastH3 rungs";
}

} // namespace h3::cli
