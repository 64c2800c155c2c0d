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

std::vector<Command> all_commands() {
    // --help lists them in this order: the user's commands, then the developer tools
    std::vector<Command> c;
    c.push_back(make_generate_command());
    c.push_back(make_serve_command());
    c.push_back(make_encode_command());
    c.push_back(make_decode_command());
    c.push_back(make_compare_command());
    c.push_back(make_inspect_command());
    c.push_back(make_make_tiny_command());
    c.push_back(make_dit_command());
    c.push_back(make_bench_command());
    return c;
}

} // namespace h3::cli
