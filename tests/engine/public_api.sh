#!/usr/bin/env bash
# The public C++ API on its own: `cmake --install BUILD --prefix P --component engine` puts
# include/h3/{engine,status,defaults}.h and libh3_engine.so under P; tests/engine/public_api.cpp is compiled
# against those alone (no -I into the source tree) and generates a tiny clip on the CPU.
# Usage: public_api.sh BUILD_DIR CXX H3_ENGINE WORK
set -euo pipefail
BUILD="$1"; CXX="$2"; H3="$3"; WORK="$4"
SRC="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$WORK"; mkdir -p "$WORK/out"
cmake --install "$BUILD" --prefix "$WORK/prefix" --component engine > "$WORK/install.txt"
[ -f "$WORK/prefix/include/h3/engine.h" ] || { echo "FAIL: engine.h not installed"; exit 1; }
"$CXX" -std=c++20 -O1 -I"$WORK/prefix/include" "$SRC/public_api.cpp" -L"$WORK/prefix/lib" -lh3_engine \
  -Wl,-rpath,"$WORK/prefix/lib" -o "$WORK/public_api"
"$H3" make-tiny "$WORK/tiny" --seed 1 > /dev/null
OMP_NUM_THREADS=2 "$WORK/public_api" "$WORK/tiny" "$WORK/out"
[ -s "$WORK/out/clip.wav" ] && [ -s "$WORK/out/clip.safetensors" ] || { echo "FAIL: outputs missing"; exit 1; }
echo "public_api: ok"
