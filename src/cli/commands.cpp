#include "cli/commands.h"

namespace h3::cli {

// Factories of the subcommands (each defined in its cmd_*.cpp).
Command make_inspect_command();
Command make_make_tiny_command();
Command make_dit_command();
Command make_bench_command();
Command make_generate_command();
Command make_encode_command();
Command make_decode_command();
Command make_serve_command();
Command make_compare_command();

AppSpec engine_app() {
    AppSpec a;
    a.name = "h3-engine";
    a.description = "h3-engine: native inference engine for MiniMax-H3 (joint video+audio diffusion)";
    // --help lists them in this order: the user's commands, then the developer tools
    a.commands = {make_generate_command(),  make_serve_command(),   make_encode_command(),
                  make_decode_command(),    make_compare_command(), make_inspect_command(),
                  make_make_tiny_command(), make_dit_command(),     make_bench_command()};
    a.user_commands = {"generate", "serve", "encode", "decode", "compare", "inspect"};
    return a;
}

} // namespace h3::cli
