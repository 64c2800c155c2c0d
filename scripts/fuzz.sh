#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan), writes their seed corpora (tests/fuzz/fuzz_seeds.cpp
# plus the checked-in safetensors seeds) and runs each target for a bounded time (one after the other unless
# H3_FUZZ_PARALLEL says otherwise).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]   (default 20 s each, every target).
# H3_FUZZ_PARALLEL=N runs N targets at once; H3_FUZZ_NICE=N runs them under nice -n N.
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
ALL=(fuzz_safetensors_header fuzz_request_json fuzz_multipart fuzz_request_target fuzz_config fuzz_image fuzz_wav
     fuzz_media fuzz_lora)
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
# checked-in findings (tests/fuzz/findings/NAME/*: inputs that once failed a target) join its seeds
for d in "$ROOT"/tests/fuzz/findings/*/; do
    mkdir -p "$SEEDS/$(basename "$d")"
    cp "$d"* "$SEEDS/$(basename "$d")/"
done

ARTIFACTS="$BUILD/fuzz_artifacts/"
mkdir -p "$ARTIFACTS"
# One target for SECONDS_TO_RUN; its log in the build tree, a summary line (executions, coverage, features,
# peak RSS) on stdout; the status is the fuzzer's.
run_target() {
    local t="$1" name="${1#fuzz_}"
    local work="$BUILD/fuzz_corpus/$name" log="$BUILD/fuzz_$name.log" dict=() rc
    mkdir -p "$work" "$SEEDS/$name"
    [ -f "$ROOT/tests/fuzz/$name.dict" ] && dict=(-dict="$ROOT/tests/fuzz/$name.dict")
    # -rss_limit_mb / -malloc_limit_mb: an input that makes a target hold more, or ask for more in one
    # allocation, is a finding (allocation from a declared size)
    set +e
    nice -n "${H3_FUZZ_NICE:-0}" "$BUILD/tests/fuzz/$t" -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 \
        -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=25 -max_len=65536 -artifact_prefix="$ARTIFACTS$name-" "${dict[@]}" \
        "$work" "$SEEDS/$name" >"$log" 2>&1
    rc=$?
    set -e
    local execs cov ft rss
    execs=$(grep -oE "^stat::number_of_executed_units:[[:space:]]+[0-9]+" "$log" | grep -oE "[0-9]+$" || true)
    rss=$(grep -oE "^stat::peak_rss_mb:[[:space:]]+[0-9]+" "$log" | grep -oE "[0-9]+$" || true)
    cov=$(grep -oE "cov: [0-9]+ ft: [0-9]+" "$log" | tail -1 || true)
    echo "== $t: ${SECONDS_TO_RUN}s, ${execs:-?} executions, ${cov:-no coverage line}, peak RSS ${rss:-?} MB, rc $rc"
    grep -E "ERROR|SUMMARY|Test unit written" "$log" || true
    if [ "$rc" -ne 0 ]; then
        tail -40 "$log" >&2
        echo "fuzz.sh: $t failed; inputs in $ARTIFACTS" >&2
    fi
    return "$rc"
}

# H3_FUZZ_PARALLEL targets at a time (default 1: CI's machine has 2 cores and the tests before this).
PARALLEL="${H3_FUZZ_PARALLEL:-1}"
failed=0
running=0
for t in "${TARGETS[@]}"; do
    if [ "$running" -ge "$PARALLEL" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
    run_target "$t" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
if [ "$failed" -ne 0 ]; then
    echo "fuzz.sh: a target failed; inputs in $ARTIFACTS" >&2
    exit 1
fi
echo "fuzz.sh: ${#TARGETS[@]} target(s) ran ${SECONDS_TO_RUN}s each without a failure"
