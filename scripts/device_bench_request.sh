#!/usr/bin/env bash
# The whole-request bench on the GPU machine: `h3-engine bench request --random-weights` at the release shape
# (1344x768, 124 frames) with 50 grid points (49 forwards) and with 4 (3 forwards): conditioner (random
# Qwen3-VL text stack at full width), denoise, video + audio decode, MP4 mux, through the Generator. Called by
# scripts/device_check.sh at its end; standalone after a device_check build: `bash scripts/device_bench_request.sh`
# (H3=path to the binary, OUT=folder for the JSON). The 50-point run takes minutes: give it its own call.
set -u
OUT=${OUT:-/tmp/h3-device-out}
H3=${H3:-./build-gpu/src/cli/h3-engine}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
for steps in ${H3_REQUEST_STEPS:-4 50}; do
  echo "== bench request 1344x768x124, $steps grid points"
  timeout "${H3_REQUEST_TIMEOUT:-560}" "$H3" bench request --random-weights --size 1344x768 --frames 124 \
    --steps "$steps" --device cuda --work /tmp/h3-bench-request-$steps --json \
    > "$OUT/bench_request_$steps.json" 2> "$OUT/bench_request_$steps.err"
  echo "bench request ($steps) rc=$?"; tail -3 "$OUT/bench_request_$steps.err"
  python3 - "$OUT/bench_request_$steps.json" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no report: {e}")
print(f"{j['geometry']}, {j['grid_points']} grid points ({j['forwards']} forwards), {j['conditioning_rows']} "
      f"conditioning rows: total {j['seconds_total']:.1f} s = encode {j['seconds_encode']:.1f} + denoise "
      f"{j['seconds_denoise']:.1f} (setup {j['seconds_denoise_setup']:.1f}, {j['seconds_per_step_mean']:.2f} s/step)"
      f" + decode {j['seconds_decode']:.1f} + mux {j['seconds_mux']:.1f}; peak {j['peak_device_gib']:.1f} GiB")
PY
done
