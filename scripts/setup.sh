#!/usr/bin/env bash
# Fresh Debian 12 → dependencies, a Release build, the embedded tiny model, and the main job on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
BUILD_DIR="${H3_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" --target h3-engine -j"$(nproc)"
H3="$BUILD_DIR/src/cli/h3-engine"
TINY="${H3_TINY_DIR:-tiny}"
"$H3" make-tiny "$TINY" --seed 0
"$H3" inspect "$TINY"
