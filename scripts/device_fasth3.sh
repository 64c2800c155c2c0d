# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_fasth3.sh) after its build:
# issue #45's whole-request measures on one GPU — `bench request --fasth3` (the 4-forward FastH3 student,
# VSA 0.9, 1344x768x124 to MP4, random full-width weights) in bf16 and with --precision fp8, interleaved twice,
# with the stage times and the kernels the job ran; then (H3_FH_PROFILE=1, default) the Nsight Compute profile
# of the VSA kernels (scripts/device_profile_vsa.sh).
fh_request() { # tag precision-args...
  local tag=$1; shift
  echo "== bench request --fasth3 $* ($tag) ($SECONDS s)"
  timeout 200 $H3 bench request --random-weights --fasth3 --size 1344x768 --frames 124 --device cuda "$@" \
    --work "/tmp/h3-fh-$tag" --json > "$OUT/fh_$tag.json" 2> "$OUT/fh_$tag.err"
  echo "rc=$?"; tail -2 "$OUT/fh_$tag.err"
  python3 - "$OUT/fh_$tag.json" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no report: {e}")
keys = ['dtype', 'attention', 'forwards', 'seconds_total', 'seconds_encode', 'seconds_denoise',
        'seconds_denoise_setup', 'seconds_per_step_mean', 'seconds_decode', 'seconds_mux', 'peak_device_gib']
print({k: j.get(k) for k in keys})
print('step_seconds', j.get('step_seconds'))
m = j.get('metrics', {})
for k in ('kernels', 'fallbacks'):
    if k in m: print(k, json.dumps(m[k])[:600])
PY
}
for round in 1 2; do
  fh_request "bf16_$round"
  fh_request "fp8_$round" --precision fp8
done
[ "${H3_FH_PROFILE:-1}" = 1 ] && source scripts/device_profile_vsa.sh
