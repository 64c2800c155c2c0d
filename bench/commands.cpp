#include "bench/commands.h"

namespace h3::bench {

cli::AppSpec bench_app() {
    cli::AppSpec a;
    a.name = "h3-bench";
    a.description =
        "h3-bench: benchmarks of h3-engine (also `h3-engine bench ...`; machine-readable with --json)";
    a.commands = {dit_command(),       vae_command(),     text_command(),
                  attention_command(), fp8_command(),     generate_command(),
                  request_command(),   quality_command(), load_command()};
    return a;
}

} // namespace h3::bench
