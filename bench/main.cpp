#include "bench/commands.h"

int main(int argc, char** argv) {
    return h3::cli::run(h3::bench::bench_app(), argc, argv);
}
