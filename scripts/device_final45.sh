# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_final45.sh H3_TARGETS=h3-engine,
# H3_CUSTOM_TESTS=1 to run the GPU suite after it): issue #45's closing measures on one GPU, in two parts that
# each fit a 600 s call (F45_PART=1 before the tests stage, F45_PART=2 on the warm machine after it):
#   1. bench request --fasth3 (1344x768x124, VSA 0.9, to MP4) with --warmup, bf16 and --precision fp8, two
#      interleaved rounds, the exact video decode.
#   2. bench dit --attention vsa:sparsity=0.9 bf16 and fp8 (per forward, the sparse kernel's TFLOP/s, the VSA
#      phases), bench vae exact f16 / bf16 blocks / fp8 blocks (whole and --stream), bench fp8 with VSA (the
#      fp8 + VSA velocity cosine against bf16 VSA), an fp8 request with --vae-precision fp8, then cold requests
#      (no warm-up) for the first-step contrast.
f45_request() { # tag args...
  local tag=$1; shift
  echo "== bench request --fasth3 $* ($tag) ($SECONDS s)"
  timeout 200 $H3 bench request --random-weights --fasth3 --size 1344x768 --frames 124 --device cuda "$@" \
    --work "/tmp/h3-f45-$tag" --json > "$OUT/f45_req_$tag.json" 2> "$OUT/f45_req_$tag.err"
  echo "rc=$?"; grep -E "warning|error" "$OUT/f45_req_$tag.err" | head -3
  python3 - "$OUT/f45_req_$tag.json" <<'PY' 2>&1 | tail -7
import json, sys
j = json.load(open(sys.argv[1]))
m = j.get("metrics", {})
r = lambda v: round(v, 3) if isinstance(v, float) else v
print({k: r(j.get(k)) for k in ("dtype", "vae_precision", "keep_loaded", "seconds_total", "seconds_encode", "seconds_denoise_setup", "seconds_denoise",
                                "seconds_decode", "seconds_mux", "peak_device_gib")},
      "mux_encode", r(m.get("mux_encode_seconds")))
print("step_seconds", [r(s) for s in j.get("step_seconds", [])])
if "denoise_parts" in m: print("denoise_parts", {k: r(v) for k, v in m["denoise_parts"].items()})
if "first_forward" in m: print("first_forward", {k: r(v) for k, v in m["first_forward"].items()})
if j.get("warmup"): print("warmup seconds", r(j["warmup"].get("seconds")))
print("kernels", json.dumps(m.get("kernels", {}))[:700])
print("fallbacks", m.get("fallbacks"))
PY
}
f45_vae() { # tag args...
  local tag=$1; shift
  timeout 150 $H3 bench vae --random-weights "$@" --json > "$OUT/f45_vae_$tag.json" 2> "$OUT/f45_vae_$tag.err"
  echo "bench vae $* rc=$?: $(python3 -c "
import json; j = json.load(open('$OUT/f45_vae_$tag.json')); r = j.get('video_roofline', {})
print({'output': j.get('video_output'), 'dtype': j.get('dtype'), 'precision': j.get('vae_precision'),
       'seconds': round(j['video_decode_seconds'], 3), 'tflops': round(r.get('achieved_tflops', 0), 1),
       'bound_s': round(r.get('lower_bound_seconds', 0), 3), 'of_bound': round(r.get('fraction_of_bound', 0), 3),
       'audio_s': round(j.get('audio_decode_seconds', 0), 3), 'peak_gib': round(j['video_peak_gib'], 2)})" 2>&1 | tail -1)"
}
f45_dit() { # tag args...
  local tag=$1; shift
  echo "== bench dit --attention vsa:sparsity=0.9 $* ($SECONDS s)"
  timeout 200 $H3 bench dit --random-weights --blocks 2 --iters 2 --frames 124 --attention vsa:sparsity=0.9 \
    --vsa-scan 0.1 "$@" --json > "$OUT/f45_dit_$tag.json" 2> "$OUT/f45_dit_$tag.err"; echo "rc=$?"
  python3 - "$OUT/f45_dit_$tag.json" <<'PY' 2>&1 | tail -5
import json, sys
j = json.load(open(sys.argv[1]))
print({k: j.get(k) for k in ("precision", "seconds_per_block", "seconds_per_forward_50_blocks")})
ops = j.get("per_op_seconds_per_block", {})
print("per_op_ms", {k: round(v * 1e3, 3) for k, v in sorted(ops.items(), key=lambda kv: -kv[1])})
print("vsa kernels ms", {k: round(v * 1e3, 3) for k, v in j.get("vsa", {}).get("phase_seconds", {}).items()})
for run in j.get("vsa", {}).get("runs", []): print("vsa run", run)
print("fallbacks", j.get("fallbacks"))
PY
}
f45_test() { # binary filter: one GPU test binary, its summary and failures
  local bin=$1 filter=$2 extra=()
  [[ $bin == test_ops* ]] && extra=(--backend cuda)
  timeout 240 "$T/$bin" --gtest_filter="$filter" "${extra[@]}" > "$OUT/test_$bin.log" 2>&1
  echo "$bin $filter rc=$?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/test_$bin.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|Failure|PSNR|dB' "$OUT/test_$bin.log" | head -12
}
f45_vae_psnr() { # tag args...: bench vae with its PSNR against the exact decode
  f45_vae "$@" --psnr-vs-exact
  python3 -c "import json; j = json.load(open('$OUT/f45_vae_$1.json')); print('psnr_vs_exact', j.get('psnr_vs_exact'), 'kernels', j.get('kernels'))" 2>&1 | tail -1
}
[ "${1:-}" = --functions-only ] && return 0
if [ "${F45_PART:-1}" = 1 ]; then
  for round in 1 2; do
    f45_request "bf16_$round" --warmup
    f45_request "fp8_$round" --precision fp8 --warmup
  done
fi
if [ "${F45_PART:-2}" = 2 ]; then
  f45_dit bf16
  f45_dit fp8 --precision fp8
  for round in 1 2; do
    echo "== bench vae round $round ($SECONDS s)"
    f45_vae "exact_$round"
    f45_vae "bf16_$round" --dtype bf16
    f45_vae "fp8_$round" --vae-precision fp8
    f45_vae "exact_stream_$round" --stream
    f45_vae "fp8_stream_$round" --vae-precision fp8 --stream
  done
  echo "== bench fp8 --attention vsa:sparsity=0.9 (50 blocks, full width) ($SECONDS s)"
  timeout 240 $H3 bench fp8 --random-weights --attention vsa:sparsity=0.9 --json > "$OUT/f45_fp8_vsa.json" \
    2> "$OUT/f45_fp8_vsa.err"; echo "rc=$?"; tail -3 "$OUT/f45_fp8_vsa.err"
  python3 -c "
import json; j = json.load(open('$OUT/f45_fp8_vsa.json'))
for v in j.get('variants', [j]):
    print({k: v.get(k) for k in v if not isinstance(v.get(k), (dict, list))}, 'fallbacks', v.get('fallbacks'))" 2>&1 | tail -6
  [ "$SECONDS" -lt 360 ] && f45_request fp8_vaefp8 --precision fp8 --warmup --vae-precision fp8
  [ "$SECONDS" -lt 420 ] && f45_request bf16_cold
  [ "$SECONDS" -lt 480 ] && f45_request fp8_cold --precision fp8
fi
echo "== device_final45 part ${F45_PART:-all} done ($SECONDS s)"
