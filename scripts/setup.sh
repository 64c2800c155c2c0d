#!/usr/bin/env bash
# Fresh Debian 12 → dependencies, a Release build, the embedded tiny model, and the main job on the CPU:
# text → Qwen3-VL conditioner → DiT sampling loop → video + audio VAE decoders → an MP4 (H.264 + AAC).
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
OUT_FILE="${H3_OUTPUT:-tiny_out.mp4}"
"$H3" generate --model "$TINY" --prompt "A red fox runs through fresh snow at dawn, wind in the pines." \
  --size 256x128 --seconds 5 --steps 8 --seed 0 --device cpu --output "$OUT_FILE"
echo "setup: wrote $OUT_FILE (random tiny model: the frames are noise-like by design)"
