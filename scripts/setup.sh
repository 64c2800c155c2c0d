#!/usr/bin/env bash
# Fresh Debian 12 → dependencies, a Release build, and the main job on the CPU with the embedded demo model:
# text → Qwen3-VL conditioner → DiT sampling loop → video + audio VAE decoders → an MP4 (H.264 + AAC).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
BUILD_DIR="${H3_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" --target h3-engine -j"$(nproc)"
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
# The random tiny checkpoint that the README's other examples and the tests use (--model tiny).
"$H3" make-tiny "${H3_TINY_DIR:-tiny}" --seed 0
