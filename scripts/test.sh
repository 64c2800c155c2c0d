#!/usr/bin/env bash
# Builds and runs every CPU test through ctest, the docs check (scripts/check_docs.sh), then the sanitizer pass
# over the file parsers, the bounded fuzz run (when clang is available) and the format check. Exit status is
# non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
JOBS="$(nproc)"
BUILD_DIR="${H3_TEST_BUILD_DIR:-build-test}"

echo "== build ($BUILD_DIR)"
# CUDA code is compiled (not run: the tests run on the CPU) for sm_75 and sm_90a: between them they take every
# architecture branch in the sources (< 800: no bf16; >= 800; == 900 with the sm_90a features), and sm_80
# would only compile the >= 800 branch a third time. H3_TEST_CUDA_ARCHS overrides.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DH3_BUILD_BENCH=ON -DH3_REQUIRE_FFMPEG=ON -DH3_REQUIRE_IMAGE_CODECS=ON \
  -DH3_CUDA_ARCHITECTURES="${H3_TEST_CUDA_ARCHS:-75;90a}"
cmake --build "$BUILD_DIR" -j"$JOBS"

echo "== tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS"

echo "== docs check: README and docs/ commands against the binary, their runnable examples, links"
bash scripts/check_docs.sh "$BUILD_DIR"

echo "== AddressSanitizer + UBSan: file parser tests"
ASAN_DIR="${BUILD_DIR}-asan"
cmake -S . -B "$ASAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DH3_SANITIZE=ON -DH3_ENABLE_CUDA=OFF \
  -DH3_BUILD_BENCH=OFF -DH3_BUILD_PYTHON=OFF
cmake --build "$ASAN_DIR" --target test_safetensors test_checkpoint -j"$JOBS"
ctest --test-dir "$ASAN_DIR" --output-on-failure -R '^(test_safetensors|test_checkpoint)$'

echo "== fuzz (bounded)"
# two targets at a time: the tests are done by now, and libFuzzer runs on one core
H3_FUZZ_PARALLEL="${H3_FUZZ_PARALLEL:-2}" bash scripts/fuzz.sh "${H3_FUZZ_SECONDS:-15}"

echo "== format check"
bash scripts/check_format.sh
