#!/usr/bin/env bash
# GPU check, run on the device machine from the repo root with $OUT set: builds for sm_90a, runs the CUDA op
# tests, the DiT CUDA-vs-reference parity test, the CUDA generate check and the DiT bench. Missing Debian
# -dev packages travel as .deb files in .debs/ (see README).
set -u
OUT=${OUT:-/tmp/h3-device-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
if [ -d .debs ]; then
  mkdir -p /tmp/deps
  for f in .debs/*.deb; do dpkg -x "$f" /tmp/deps; done
  export CMAKE_PREFIX_PATH=/tmp/deps/usr
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  # PCRE2's .pc file from the carried .deb (paths under the sysroot) when the machine has none.
  if ! pkg-config --exists libpcre2-8; then
    export PKG_CONFIG_PATH=/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/tmp/deps
  fi
fi
# cuDNN: the toolkit's, else a Python wheel's (header and library from one place).
CUDNN_ARGS=()
if ! ls /usr/local/cuda/include/cudnn.h /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h >/dev/null 2>&1; then
  W=$(dirname "$(find / -path '*nvidia/cudnn/include/cudnn.h' 2>/dev/null | head -1)")/..
  LIB=$(ls "$W"/lib/libcudnn.so* | head -1)
  CUDNN_ARGS=(-DH3_CUDNN_INCLUDE="$W/include" -DH3_CUDNN_LIB="$LIB")
  export LD_LIBRARY_PATH="$W/lib:$LD_LIBRARY_PATH"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DH3_CUDA_ARCHITECTURES=90a -DH3_BUILD_BENCH=OFF \
  "${CUDNN_ARGS[@]}" > "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu -j"$(nproc)" h3-engine test_ops test_dit > "$OUT/build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/build.log" | head -60; exit 1; }
echo "== build ok"
timeout 240 ./build-gpu/tests/test_ops --backend cuda > "$OUT/test_ops_cuda.log" 2>&1
echo "test_ops --backend cuda rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/test_ops_cuda.log" | head -20
timeout 120 ./build-gpu/tests/test_dit --gtest_filter='DitCuda.*' > "$OUT/test_dit_cuda.log" 2>&1
echo "test_dit DitCuda rc=$?"; grep -E "sample|FAILED|PASSED" "$OUT/test_dit_cuda.log" | head -20
H3=./build-gpu/src/cli/h3-engine
timeout 120 $H3 bench dit --random-weights --blocks 2 --iters 1 --json > "$OUT/bench_2.json" 2> "$OUT/bench_2.err"
echo "bench(2 blocks) rc=$?"; cat "$OUT/bench_2.json"; tail -5 "$OUT/bench_2.err"
ATT=$(python3 -c "import json;print(json.load(open('$OUT/bench_2.json'))['attention_tflops'])" 2>/dev/null || echo 0)
if python3 -c "import sys; sys.exit(0 if float('$ATT') > 100 else 1)"; then
  timeout 240 $H3 bench dit --random-weights --blocks 50 --iters 1 --json > "$OUT/bench_50.json" 2> "$OUT/bench_50.err"
  echo "bench(50 blocks) rc=$?"; cat "$OUT/bench_50.json"; tail -5 "$OUT/bench_50.err"
fi
