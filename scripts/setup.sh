#!/usr/bin/env bash
# Fresh Debian 12 → the packages, a Release build of h3-engine and of the h3engine Python module, and the main
# job on the CPU with the embedded demo model: text → Qwen3-VL conditioner → DiT sampling loop → video + audio
# VAE decoders → an MP4 (H.264 + AAC).
#
# It builds what this machine can use: the CUDA backend only where a GPU is visible (nvidia-smi lists one, or
# /dev/nvidia0 exists) and nvcc is found; H3_CUDA=on builds it anyway, H3_CUDA=off never. Only the two targets
# above are built (no tests, no benches: scripts/test.sh builds those, with CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --build
BUILD_DIR="${H3_BUILD_DIR:-build}"
case "${H3_CUDA:-auto}" in
  on) CUDA=ON ;;
  off) CUDA=OFF ;;
  auto)
    if [ -e /dev/nvidia0 ] || { command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; }; then
      CUDA=ON
    else
      CUDA=OFF
    fi ;;
  *) echo "setup: H3_CUDA must be on, off or auto (got '${H3_CUDA}')" >&2; exit 2 ;;
esac
echo "setup: CUDA backend $CUDA (H3_CUDA=${H3_CUDA:-auto})"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DH3_ENABLE_CUDA="$CUDA" \
  -DH3_BUILD_TESTS=OFF -DH3_BUILD_BENCH=OFF
TARGETS=(h3-engine)
# h3engine exists when pybind11 and the Python headers were found (install_deps.sh --build installs them)
if cmake --build "$BUILD_DIR" --target help | grep -q '^h3engine:'; then
  TARGETS+=(h3engine)
else
  echo "setup: no Python module (pybind11 or the Python headers not found)"
fi
cmake --build "$BUILD_DIR" --target "${TARGETS[@]}" -j"$(nproc)"
H3="$BUILD_DIR/src/cli/h3-engine"
# The main job: the embedded default, models/h3-demo, a tiny model in the MiniMax-H3 architecture trained on
# procedural clips of moving shapes (tools/train_demo) -- not MiniMax-H3. No --model: generate runs it at its
# native 128x64, 107 frames (4.5 s), on the CPU in about ten seconds.
"$H3" inspect models/h3-demo --strict
OUT_FILE="${H3_OUTPUT:-demo_out.mp4}"
"$H3" generate --prompt "a blue square bounces to the right on a light background" --seed 1 --steps 30 \
  --device cpu --output "$OUT_FILE"
echo "setup: wrote $OUT_FILE: a blue square moving right and bouncing off the walls, with the square's bounce tone (about 330 Hz)"
echo "setup: (the tiny demo model, not MiniMax-H3: run the real checkpoint with generate --model DIR)"
# The random tiny checkpoint that the docs' other examples and the tests use (--model tiny).
"$H3" make-tiny "${H3_TINY_DIR:-tiny}" --seed 0
echo "setup: the binary is $H3; 'cmake --install $BUILD_DIR --prefix ~/.local' puts h3-engine in ~/.local/bin"
echo "setup: the benchmarks (h3-engine bench) are a target of their own: cmake --build $BUILD_DIR --target h3-bench"
if [[ " ${TARGETS[*]} " == *" h3engine "* ]]; then
  echo "setup: the Python module is in $BUILD_DIR/python (PYTHONPATH=$BUILD_DIR/python python3 -c 'import h3engine')"
fi
