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
TARGETS="h3-engine test_ops test_ops_conv test_dit test_text_encoder test_vae test_generate"
ninja -C build-gpu -j"$(nproc)" $TARGETS > "$OUT/build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/build.log" | head -60; exit 1; }
echo "== build ok"
T=./build-gpu/tests
H3=./build-gpu/src/cli/h3-engine
run_test() {  # name, log, args...
  local name=$1 log=$2; shift 2
  timeout 240 "$@" > "$OUT/$log" 2>&1; local rc=$?
  echo "$name rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$OUT/$log" | head -10
}
run_test "test_ops --backend cuda" ops.log $T/test_ops --backend cuda
run_test "test_ops_conv --backend cuda" ops_conv.log $T/test_ops_conv --backend cuda
run_test "test_dit (all, incl. DitCuda)" dit.log $T/test_dit
grep -E "cuda (A|B) (bf16|fp32) (sample|audio_sample|blocks.2.out)" "$OUT/dit.log"
run_test "test_text_encoder (incl. CUDA)" text.log $T/test_text_encoder
run_test "test_vae (incl. CUDA)" vae.log $T/test_vae
run_test "test_generate" generate.log $T/test_generate
# tiny model: generate on CPU and on CUDA from the same seed, compare the final latents
$H3 make-tiny /tmp/tiny > /dev/null
for dev in cpu cuda; do
  for dt in fp32 bf16; do
    timeout 120 $H3 generate --model /tmp/tiny --prompt "a red fox runs through snow" --size 64x32 --frames 107 \
      --steps 6 --seed 7 --device $dev --dtype $dt --save-latents /tmp/lat_${dev}_$dt.safetensors --progress none \
      > /dev/null 2> "$OUT/gen_${dev}_$dt.err" || { echo "generate $dev $dt failed"; tail -3 "$OUT/gen_${dev}_$dt.err"; }
  done
done
for dt in fp32 bf16; do
  echo "tiny generate cuda vs cpu ($dt):"
  python3 tools/reference/compare_latents.py /tmp/lat_cuda_$dt.safetensors /tmp/lat_cpu_$dt.safetensors
done
timeout 120 $H3 bench dit --random-weights --blocks 2 --iters 1 --json > "$OUT/bench_2.json" 2> "$OUT/bench_2.err"
echo "bench(2 blocks) rc=$?"; cat "$OUT/bench_2.json"; tail -5 "$OUT/bench_2.err"
ATT=$(python3 -c "import json;print(json.load(open('$OUT/bench_2.json'))['attention_tflops'])" 2>/dev/null || echo 0)
if python3 -c "import sys; sys.exit(0 if float('$ATT') > 100 else 1)"; then
  timeout 240 $H3 bench dit --random-weights --blocks 50 --iters 1 --json > "$OUT/bench_50.json" 2> "$OUT/bench_50.err"
  echo "bench(50 blocks) rc=$?"; cat "$OUT/bench_50.json"; tail -5 "$OUT/bench_50.err"
fi
echo "== bench generate (full width, random weights, 4 grid points = 3 forwards)"
timeout 240 $H3 bench generate --random-weights --steps 4 --json > "$OUT/bench_generate.json" 2> "$OUT/bench_generate.err"
echo "bench generate rc=$?"; cat "$OUT/bench_generate.json"; tail -3 "$OUT/bench_generate.err"
echo "== bench text"
timeout 120 $H3 bench text --random-weights --tokens 537 --json > "$OUT/bench_text.json" 2> "$OUT/bench_text.err"
echo "bench text rc=$?"; cat "$OUT/bench_text.json"; tail -3 "$OUT/bench_text.err"
if $H3 bench vae --help > /dev/null 2>&1; then
  echo "== bench vae"
  timeout 240 $H3 bench vae --random-weights --json > "$OUT/bench_vae.json" 2> "$OUT/bench_vae.err"
  echo "bench vae rc=$?"; cat "$OUT/bench_vae.json"; tail -3 "$OUT/bench_vae.err"
fi
# Keep at most 8 files under $OUT (the device tool returns no more): pack the logs.
(cd "$OUT" && tar czf logs.tgz *.log *.err *.json gpu.txt 2>/dev/null && find . -maxdepth 1 -type f ! -name logs.tgz -delete)
