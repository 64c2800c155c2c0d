#!/usr/bin/env bash
# Attention / fp8 checks and measurements on the GPU machine (issue #19), from the repo root with $OUT set.
# device_check.sh calls it after its build (binaries in build-gpu/); `--build` makes it configure and build
# only what it needs first (the dev runs). Writes logs under $OUT, prints a short table at the end.
#   H3_ATTN_QUICK=1: correctness only (no full-size benches).
#   H3_ATTN_SWEEP=1: kernel iteration: the stage and candidate tests, then the attention benches at both
#                    sizes and one fp8 DiT block bench (no other tests).
set -u
OUT=${OUT:-/tmp/h3-device-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
B=build-gpu
if [ "${1:-}" = "--build" ]; then
  if [ -d .debs ]; then
    mkdir -p /tmp/deps
    for f in .debs/*.deb; do dpkg -x "$f" /tmp/deps; done
    export CMAKE_PREFIX_PATH=/tmp/deps/usr
    export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
    if ! pkg-config --exists libpcre2-8; then
      export PKG_CONFIG_PATH=/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/tmp/deps
    fi
  fi
  CUDNN_ARGS=()
  if ! ls /usr/local/cuda/include/cudnn.h /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h >/dev/null 2>&1; then
    W=$(dirname "$(find / -path '*nvidia/cudnn/include/cudnn.h' 2>/dev/null | head -1)")/..
    LIB=$(ls "$W"/lib/libcudnn.so* | head -1)
    CUDNN_ARGS=(-DH3_CUDNN_INCLUDE="$W/include" -DH3_CUDNN_LIB="$LIB")
    export LD_LIBRARY_PATH="$W/lib:$LD_LIBRARY_PATH"
  fi
  t0=$(date +%s)
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DH3_CUDA_ARCHITECTURES=90a -DH3_BUILD_BENCH=OFF \
    "${CUDNN_ARGS[@]}" > "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
  ninja -C $B -j"$(nproc)" h3-engine h3-bench test_ops test_ops_fp8 test_dit_fp8 > "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -60; exit 1; }
  echo "== build ok ($(( $(date +%s) - t0 )) s)"
fi
T=./$B/tests
H3=./$B/src/cli/h3-engine
gpu_state() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv,noheader 2>&1; }
echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1) | sm MHz, mem MHz, W, limit, C: $(gpu_state)"
run_test() { # name, log, timeout, args...
  local name=$1 log=$2 limit=$3; shift 3
  timeout "$limit" "$@" > "$OUT/$log" 2>&1; local rc=$?
  RC=$rc
  echo "$name rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|Failure|error:|got .* want|outside atol' "$OUT/$log" | head -24
  grep -E "rel-RMS|cos " "$OUT/$log" | head -8
}
# The sm_90a kernels' stage test first, alone and short: a hang (a pipeline deadlock) stops the script here.
run_test "test_ops_fp8 --backend cuda (Hopper stages)" ops_stages.log 45 $T/test_ops_fp8 --backend cuda \
  --gtest_filter='*HopperStages*'
if [ "$RC" = 124 ]; then echo "== the Hopper kernels hang: stopping"; exit 1; fi
if [ "${H3_ATTN_SWEEP:-0}" = 1 ]; then
  run_test "test_ops_fp8 --backend cuda (candidates)" ops_cand.log 90 $T/test_ops_fp8 --backend cuda \
    --gtest_filter='*AttentionCandidates*:*AttentionFp8*:*GemmFp8*'
  for S in 38247 104503; do
    timeout 200 $H3 bench attention --seq $S --fp8 --iters 2 --rounds 2 > "$OUT/attn_$S.log" 2> "$OUT/attn_$S.err"
    echo "rc=$? $(gpu_state)"; cat "$OUT/attn_$S.log"; tail -3 "$OUT/attn_$S.err"
  done
  timeout 120 $H3 --log-level info bench dit --random-weights --blocks 2 --iters 1 --precision fp8 > "$OUT/dit_fp8.log" 2>&1
  echo "rc=$?"; grep -E "gemm_fp8|DiT bench" "$OUT/dit_fp8.log"
  exit 0
fi
run_test "test_ops_fp8 --backend cuda" ops_fp8.log 120 $T/test_ops_fp8 --backend cuda --gtest_filter='-*HopperStages*'
run_test "test_ops --backend cuda (Attention*)" ops_attn.log 120 $T/test_ops --backend cuda --gtest_filter='*Attention*'
run_test "test_dit_fp8 (CPU bound + CUDA vs CPU)" dit_fp8.log 150 $T/test_dit_fp8
# tiny model, --precision fp8 (e4m3 GEMMs; its head dim 32 keeps attention bf16) on CPU and CUDA: the same
# quantization on both, so the latents agree like the bf16 ones do
[ -d /tmp/tiny ] || $H3 make-tiny /tmp/tiny > /dev/null
for dev in cpu cuda; do
  timeout 120 $H3 generate --model /tmp/tiny --prompt "a red fox runs through snow" --size 64x32 --frames 107 \
    --steps 6 --seed 7 --device $dev --precision fp8 --save-latents /tmp/lat_fp8_$dev.safetensors --progress none \
    > /dev/null 2> "$OUT/gen_fp8_$dev.err" || { echo "generate fp8 $dev failed"; tail -3 "$OUT/gen_fp8_$dev.err"; }
done
echo "tiny generate --precision fp8, cuda vs cpu:"
python3 tools/reference/compare_latents.py /tmp/lat_fp8_cuda.safetensors /tmp/lat_fp8_cpu.safetensors
if [ "${H3_ATTN_QUICK:-0}" = 1 ]; then exit 0; fi
echo "== bench attention (every candidate, same process; ms, TFLOP/s, x the default cuDNN plan, error vs exact)"
timeout 240 $H3 bench attention --seq 38247 --fp8 --iters 3 --rounds 2 > "$OUT/attn_38k.log" 2> "$OUT/attn_38k.err"
echo "rc=$? $(gpu_state)"; cat "$OUT/attn_38k.log"; tail -3 "$OUT/attn_38k.err"
timeout 200 $H3 bench attention --seq 104503 --fp8 --iters 1 --rounds 2 > "$OUT/attn_104k.log" 2> "$OUT/attn_104k.err"
echo "rc=$? $(gpu_state)"; cat "$OUT/attn_104k.log"; tail -3 "$OUT/attn_104k.err"
timeout 120 $H3 bench attention --seq 537 --heads 64 --kv-heads 8 --causal --iters 20 --rounds 2 > "$OUT/attn_text.log" 2> "$OUT/attn_text.err"
echo "rc=$?"; cat "$OUT/attn_text.log"; tail -3 "$OUT/attn_text.err"
echo "== bench dit (2 blocks timed, x50 per forward): 1344x768x124 (S=38,247) and 14.4 s (345 frames)"
for prec in bf16 fp8; do
  for fr in 124 345; do
    timeout 240 $H3 bench dit --random-weights --blocks 2 --iters 1 --frames $fr --precision $prec --json \
      > "$OUT/dit_${prec}_$fr.json" 2> "$OUT/dit_${prec}_$fr.err"
    rc=$?
    python3 - "$OUT/dit_${prec}_$fr.json" "$prec" "$fr" "$rc" <<'PY'
import json, sys
p, prec, fr, rc = sys.argv[1:5]
try:
    j = json.load(open(p))
    print(f"dit {prec} frames={fr} rows={j['rows']}: {j['seconds_per_block']:.4f} s/block, {j['seconds_per_forward_50_blocks']:.2f} s/forward, "
          f"{j['useful_tflops']:.0f} TFLOP/s useful, attention {j['attention_tflops']:.0f} TFLOP/s, peak {j['peak_device_gib']:.1f} GiB")
except Exception as e:
    print(f"dit {prec} frames={fr}: rc={rc} ({e})")
PY
    tail -2 "$OUT/dit_${prec}_$fr.err"
  done
done
echo "$(gpu_state)"
echo "== bench fp8 (one full-width 50-block forward, fp8 vs bf16 velocity)"
timeout 300 $H3 bench fp8 --random-weights > "$OUT/fp8_compare.log" 2> "$OUT/fp8_compare.err"
echo "rc=$?"; cat "$OUT/fp8_compare.log"; tail -3 "$OUT/fp8_compare.err"
echo "$(gpu_state)"
