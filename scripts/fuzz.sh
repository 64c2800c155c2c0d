#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan), writes their seed corpora (tests/fuzz/fuzz_seeds.cpp
# plus the checked-in safetensors seeds) and runs each target for a bounded time, one after the other.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]   (default 20 s each, every target).
# Exits 0 with a notice when clang is unavailable; non-zero when a target finds a crash (its input is kept in
# the build tree's fuzz_artifacts/).
set -euo pipefail

SECONDS_TO_RUN="${1:-20}"
if ! [[ "$SECONDS_TO_RUN" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [SECONDS_PER_TARGET] [TARGET ...]" >&2
    exit 2
fi
shift || true
if ! command -v clang >/dev/null 2>&1 || ! command -v clang++ >/dev/null 2>&1; then
    echo "fuzz.sh: clang/clang++ not found, skipped"
    exit 0
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${H3_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
ALL=(fuzz_safetensors_header fuzz_request_json fuzz_multipart fuzz_config fuzz_image fuzz_wav fuzz_media)
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL[@]}")

GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# -O1 for the libraries the fuzzers link: they only need to be correct, and build faster
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" "${GENERATOR[@]}" "${LAUNCHER[@]}" -DH3_FUZZ=ON \
    -DH3_ENABLE_CUDA=OFF -DH3_BUILD_TESTS=OFF -DH3_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" >/dev/null
cmake --build "$BUILD" --target "${TARGETS[@]}" fuzz_seeds -j "${H3_FUZZ_JOBS:-2}"

SEEDS="$BUILD/fuzz_seeds_out"
rm -rf "$SEEDS"
"$BUILD/tests/fuzz/fuzz_seeds" "$SEEDS" >/dev/null
mkdir -p "$SEEDS/safetensors_header"
cp "$ROOT"/tests/fuzz/corpus/*.safetensors "$SEEDS/safetensors_header/"

ARTIFACTS="$BUILD/fuzz_artifacts/"
mkdir -p "$ARTIFACTS"
for t in "${TARGETS[@]}"; do
    name="${t#fuzz_}"
    work="$BUILD/fuzz_corpus/$name"
    mkdir -p "$work" "$SEEDS/$name"
    echo "== $t (${SECONDS_TO_RUN}s)"
    # -rss_limit_mb: an input that makes a target allocate past it is a finding (allocation from a declared size)
    log="$BUILD/fuzz_$name.log"
    set +e
    "$BUILD/tests/fuzz/$t" -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 -rss_limit_mb=2048 \
        -timeout=25 -max_len=65536 -artifact_prefix="$ARTIFACTS$name-" "$work" "$SEEDS/$name" >"$log" 2>&1
    rc=$?
    set -e
    grep -E "^stat::(number_of_executed_units|peak_rss_mb)|ERROR|SUMMARY|Test unit written" "$log" || true
    if [ "$rc" -ne 0 ]; then
        tail -40 "$log" >&2
        echo "fuzz.sh: $t failed; inputs in $ARTIFACTS" >&2
        exit 1
    fi
done
echo "fuzz.sh: ${#TARGETS[@]} target(s) ran ${SECONDS_TO_RUN}s each without a failure"
