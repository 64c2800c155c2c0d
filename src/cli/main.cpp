#include "cli/app.h"

int main(int argc, char** argv) {
    return h3::cli::run(argc, argv);
}
