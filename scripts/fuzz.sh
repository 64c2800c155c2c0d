#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs the safetensors header fuzzer.
# Usage: scripts/fuzz.sh [SECONDS]   (default 60). Exits 0 with a notice when clang is unavailable.
set -euo pipefail

SECONDS_TO_RUN="${1:-60}"
if ! [[ "$SECONDS_TO_RUN" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [SECONDS]" >&2
    exit 2
fi
if ! command -v clang >/dev/null 2>&1 || ! command -v clang++ >/dev/null 2>&1; then
    echo "fuzz.sh: clang/clang++ not found, skipped"
    exit 0
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${H3_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"

GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" "${GENERATOR[@]}" -DH3_FUZZ=ON -DH3_ENABLE_CUDA=OFF \
    -DH3_BUILD_TESTS=OFF -DH3_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" --target fuzz_safetensors_header -j "${H3_FUZZ_JOBS:-2}"

# Seeds are read from the checked-in corpus; new inputs go to a scratch corpus in the build tree.
WORK_CORPUS="$BUILD/fuzz_corpus/safetensors_header"
ARTIFACTS="$BUILD/fuzz_artifacts/"
mkdir -p "$WORK_CORPUS" "$ARTIFACTS"
"$BUILD/tests/fuzz/fuzz_safetensors_header" -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 \
    -artifact_prefix="$ARTIFACTS" "$WORK_CORPUS" "$ROOT/tests/fuzz/corpus"
echo "fuzz.sh: fuzz_safetensors_header ran ${SECONDS_TO_RUN}s without a failure"
