# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_warm_up.sh H3_TARGETS=h3-engine):
# issue #45's first-step penalty with the warm-up and the kept GEMM choices — bench request --fasth3 at
# 1344x768x124, bf16 and fp8, each without and with --warmup (the warm-up reported apart; the first forward's
# one-time work printed), then twice with H3_GEMM_TUNING_FILE (the first run writes the file, the second, a
# new process, times nothing). WU_PART=1 runs the four warm-up requests, WU_PART=2 the two tuning-file ones
# (each part fits one 600 s device call); unset: both.
wu_request() { # tag env... -- bench args
  local tag=$1; shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "== bench request --fasth3 $* ($tag) ($SECONDS s)"
  env "${envs[@]}" timeout 240 $H3 bench request --random-weights --fasth3 --size 1344x768 --frames 124 \
    --device cuda --work "/tmp/h3-wu-$tag" --json "$@" > "$OUT/wu_$tag.json" 2> "$OUT/wu_$tag.err"
  echo "rc=$?"; grep "warm-up" "$OUT/wu_$tag.err" | tail -1
  python3 - "$OUT/wu_$tag.json" <<'PY' 2>&1 | tail -4
import json, sys
j = json.load(open(sys.argv[1]))
m = j["metrics"]
print("step_seconds", [round(s, 3) for s in j["step_seconds"]], "decode", round(j["seconds_decode"], 2))
print("first_forward", {k: (round(v, 3) if isinstance(v, float) else v) for k, v in m["first_forward"].items()})
if j.get("warmup"):
    w = j["warmup"]
    print("warmup seconds", round(w["seconds"], 2), "forwards", [round(s, 3) for s in w["step_seconds"]],
          "its first_forward gemm_tunings", w["metrics"]["first_forward"]["gemm_tunings"])
PY
}
if [ "${WU_PART:-1}" = 1 ] || [ -z "${WU_PART:-}" ]; then
  wu_request bf16_cold H3_WU=1 --
  wu_request bf16_warm H3_WU=1 -- --warmup
  wu_request fp8_cold H3_WU=1 -- --precision fp8
  wu_request fp8_warm H3_WU=1 -- --precision fp8 --warmup
fi
if [ "${WU_PART:-2}" = 2 ]; then
  rm -f /tmp/h3-gemm-tuning.txt
  wu_request bf16_file1 H3_GEMM_TUNING_FILE=/tmp/h3-gemm-tuning.txt --
  wu_request bf16_file2 H3_GEMM_TUNING_FILE=/tmp/h3-gemm-tuning.txt --
  echo "tuning file: $(wc -l < /tmp/h3-gemm-tuning.txt 2>/dev/null) lines"; head -2 /tmp/h3-gemm-tuning.txt
fi
