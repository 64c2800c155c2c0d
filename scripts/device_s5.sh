# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_s5.sh H3_TARGETS=h3-engine):
# issue #45's measures in the fifth session of 2026-12-07, in parts that each fit a 600 s call (S5_PART):
#   1. every kernel's GPU time in one full-width VSA block (ncu, bf16 and fp8, summed by kernel name), then
#      bench load (cold start against dd);
#   2. the 50-grid-point t2va request (nothing regressed);
#   3. the closing measures (after a tests stage): bench request --fasth3 --warmup bf16 / fp8 in two
#      interleaved rounds, bench dit VSA bf16 / fp8, bench vae fp8 against the exact decode, then one fp8
#      request without --warmup (its decode's one-time work);
#   pre. a pre-test of new kernels: the GPU tests named in S5_TESTS ("binary:filter ..."), then bench dit VSA
#      bf16 / fp8 and bench vae fp8 against the exact decode.
source scripts/device_final45.sh --functions-only
s5_kernel_times() { # tag args...: ncu's gpu__time_duration for every kernel of a 1-block bench dit, by name
  local tag=$1; shift
  export PATH=/usr/local/cuda/bin:$PATH
  local ncu; ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -z "$ncu" ] && { echo "s5: no ncu"; return 0; }
  echo "== ncu kernel times: bench dit --blocks 1 VSA 0.9 $* ($SECONDS s)"
  timeout 280 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    "$H3" bench dit --random-weights --blocks 1 --iters 1 --frames 124 --attention vsa:sparsity=0.9 --vsa-scan 0.1 \
    "$@" --json > "$OUT/s5_ncu_$tag.csv" 2> "$OUT/s5_ncu_$tag.err"
  echo "ncu rc=$?"; tail -2 "$OUT/s5_ncu_$tag.err"
  python3 - "$OUT/s5_ncu_$tag.csv" <<'PY' 2>&1 | tail -40
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
t = collections.defaultdict(list)
for r in csv.DictReader(rows):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        t[r["Kernel Name"][:90]].append(float(r["Metric Value"]) * 1e-6)
print("kernels profiled:", sum(len(v) for v in t.values()))
for k, v in sorted(t.items(), key=lambda kv: -sum(kv[1]))[:36]:
    print(f"{sum(v):9.3f} ms  n={len(v):4d}  last={v[-1]:.3f}  {k}")
PY
}
if [ "${S5_PART:-1}" = 1 ]; then
  s5_kernel_times fp8 --precision fp8
  s5_kernel_times bf16
  echo "== bench load --blocks 16 ($SECONDS s)"
  df -h /tmp | tail -1
  timeout 240 $H3 bench load --dir /tmp/h3-load --blocks 16 --device cuda --json \
    > "$OUT/s5_load.json" 2> "$OUT/s5_load.err"; echo "rc=$?"; tail -3 "$OUT/s5_load.err"
  python3 -c "import json; print(json.dumps(json.load(open('$OUT/s5_load.json')))[:1500])" 2>&1 | tail -2
fi
if [ "${S5_PART:-1}" = 2 ]; then
  echo "== bench request 1344x768x124, 50 grid points (t2va, dense) ($SECONDS s)"
  timeout 400 $H3 bench request --random-weights --size 1344x768 --frames 124 --steps 50 --device cuda \
    --work /tmp/h3-s5-t2va --json > "$OUT/s5_t2va.json" 2> "$OUT/s5_t2va.err"; echo "rc=$?"
  python3 -c "
import json; j = json.load(open('$OUT/s5_t2va.json')); r = lambda v: round(v, 3) if isinstance(v, float) else v
s = j.get('step_seconds', [])
print({k: r(j.get(k)) for k in ('seconds_total', 'seconds_encode', 'seconds_denoise', 'seconds_decode', 'seconds_mux',
                                'peak_device_gib')}, 'steps', len(s), 'first', r(s[0]) if s else None,
      'median', r(sorted(s)[len(s) // 2]) if s else None)" 2>&1 | tail -2
fi
s5_overhead() { # tag: issue #45's VSA share from f45_dit's JSON
  python3 -c "import json; j = json.load(open('$OUT/f45_dit_$1.json')); print('$1 vsa overhead', round(j.get('vsa_overhead_seconds_per_block', 0) * 1e3, 3), 'ms/block =', round(100 * j.get('vsa_overhead_fraction', 0), 2), '% of', round(j.get('seconds_per_block', 0) * 1e3, 2), 'ms')" 2>&1 | tail -1
}
if [ "${S5_PART:-1}" = pre ]; then
  for t in ${S5_TESTS:-}; do f45_test "${t%%:*}" "${t#*:}"; done
  f45_dit bf16; s5_overhead bf16
  f45_dit fp8 --precision fp8; s5_overhead fp8
  f45_vae_psnr fp8 --vae-precision fp8
fi
if [ "${S5_PART:-1}" = 3 ]; then # most needed first: a call that runs out of time loses the tail
  f45_dit fp8 --precision fp8; s5_overhead fp8
  f45_dit bf16; s5_overhead bf16
  for round in ${S5_ROUNDS:-1 2}; do
    f45_request "bf16_$round" --warmup
    f45_request "fp8_$round" --precision fp8 --warmup
  done
  f45_vae_psnr fp8 --vae-precision fp8
  f45_request fp8_cold --precision fp8
fi
echo "== device_s5 part ${S5_PART:-1} done ($SECONDS s)"
