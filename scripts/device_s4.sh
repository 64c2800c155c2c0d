# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_s4.sh, H3_TARGETS="h3-engine
# test_vae test_dit_fp8 test_ops_vsa"): issue #45's measures that the fourth session of 2026-12-07 lacked, in
# parts that each fit a 600 s call (S4_PART):
#   1. (S4_TESTS=1: the GPU tests never run before: VaeCuda.*, the fused fp8 + VSA CUDA check, test_ops_vsa),
#      VSA's small kernels one by one and the VSA phases (bench dit bf16 / fp8), bench vae exact / bf16 blocks /
#      fp8, the decode's fast path against the exact one in a whole request (compare: video PSNR),
#      H3_GEMM_TUNING_FILE across two processes, then the fp8 + VSA velocity cosine against bf16 VSA (bench fp8,
#      50 full-width blocks).
#   2. the fp8 + VSA cosine, then the 50-grid-point t2va request (nothing regressed).
#   3. the closing measures: bench request --fasth3 --warmup bf16 / fp8 in two interleaved rounds, bench dit VSA
#      bf16 / fp8, and (S4_VAE="bf16 fp8") fp8 requests with those video decoders compared with the exact one;
#      S4_TUNING=1 first: H3_GEMM_TUNING_FILE across two processes.
source scripts/device_final45.sh --functions-only
s4_test() { # tag binary filter [args...]
  local tag=$1 bin=$2 filter=$3; shift 3
  timeout 200 "$T/$bin" --gtest_filter="$filter" "$@" > "$OUT/s4_$tag.log" 2>&1
  echo "$bin $filter $* rc=$?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/s4_$tag.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|Failure|PSNR|psnr|dB' "$OUT/s4_$tag.log" | head -12
}
s4_compare() { # reference candidate tag
  timeout 120 $H3 compare "$1" "$2" --json > "$OUT/s4_cmp_$3.json" 2> "$OUT/s4_cmp_$3.err"
  echo "compare $3 rc=$?: $(python3 -c "
import json; j = json.load(open('$OUT/s4_cmp_$3.json')); v = j.get('video', j)
print({k: v.get(k) for k in v if not isinstance(v.get(k), (list, dict))})" 2>&1 | tail -1)"
}
s4_tuning() { # H3_GEMM_TUNING_FILE across two processes: the second one tunes nothing
  echo "== H3_GEMM_TUNING_FILE across two processes (FastH3, 640x352x107, no warm-up) ($SECONDS s)"
  rm -f /tmp/h3-tuning.txt
  for run in 1 2; do
    H3_GEMM_TUNING_FILE=/tmp/h3-tuning.txt timeout 150 $H3 bench request --random-weights --fasth3 \
      --size 640x352 --frames 107 --device cuda --work "/tmp/h3-s4-tuning-$run" --json \
      > "$OUT/s4_tuning_$run.json" 2> "$OUT/s4_tuning_$run.err"
    echo "run $run rc=$?: $(python3 -c "
import json; j = json.load(open('$OUT/s4_tuning_$run.json')); m = j.get('metrics', {})
print('steps', [round(s, 3) for s in j.get('step_seconds', [])], 'first_forward', m.get('first_forward'),
      'decode', round(j.get('seconds_decode', 0), 3))" 2>&1 | tail -1)"
  done
  ls -l /tmp/h3-tuning.txt; head -3 /tmp/h3-tuning.txt
}

if [ "${S4_PART:-1}" = 1 ]; then
  if [ "${S4_TESTS:-0}" = 1 ]; then
    echo "== GPU tests not run before ($SECONDS s)"
    s4_test vae test_vae 'VaeCuda.*'
    s4_test dit_fp8 test_dit_fp8 '*Cuda*'
    s4_test ops_vsa test_ops_vsa '*' --backend cuda
  fi
  f45_dit bf16
  f45_dit fp8 --precision fp8
  echo "== bench vae ($SECONDS s)"
  f45_vae exact
  f45_vae bf16 --dtype bf16
  f45_vae fp8 --vae-precision fp8
  echo "== the decode's fast path against the exact one in a whole FastH3 request ($SECONDS s)"
  f45_request exact --warmup
  f45_request vaefp8 --vae-precision fp8 --warmup
  s4_compare /tmp/h3-f45-exact/request.mp4 /tmp/h3-f45-vaefp8/request.mp4 vaefp8
  ls -l /tmp/h3-f45-exact/request.mp4 /tmp/h3-f45-vaefp8/request.mp4
  s4_tuning
fi
if [ "${S4_PART:-1}" = 1 ] || [ "${S4_PART:-1}" = 2 ]; then
  echo "== bench fp8 --attention vsa:sparsity=0.9 (50 blocks, full width) ($SECONDS s)"
  timeout 240 $H3 bench fp8 --random-weights --attention vsa:sparsity=0.9 --json > "$OUT/s4_fp8_vsa.json" \
    2> "$OUT/s4_fp8_vsa.err"; echo "rc=$?"; tail -3 "$OUT/s4_fp8_vsa.err"
  python3 -c "
import json; j = json.load(open('$OUT/s4_fp8_vsa.json'))
for v in j.get('variants', [j]):
    print({k: v.get(k) for k in v if not isinstance(v.get(k), (dict, list))}, 'fallbacks', v.get('fallbacks'))" 2>&1 | tail -6
fi
if [ "${S4_PART:-1}" = 2 ]; then
  echo "== bench request 1344x768x124, 50 grid points (t2va, dense) ($SECONDS s)"
  timeout 330 $H3 bench request --random-weights --size 1344x768 --frames 124 --steps 50 --device cuda \
    --work /tmp/h3-s4-t2va --json > "$OUT/s4_t2va.json" 2> "$OUT/s4_t2va.err"; echo "rc=$?"
  python3 -c "
import json; j = json.load(open('$OUT/s4_t2va.json')); r = lambda v: round(v, 3) if isinstance(v, float) else v
s = j.get('step_seconds', [])
print({k: r(j.get(k)) for k in ('seconds_total', 'seconds_encode', 'seconds_denoise', 'seconds_decode', 'seconds_mux',
                                'peak_device_gib')}, 'steps', len(s), 'first', r(s[0]) if s else None,
      'median', r(sorted(s)[len(s) // 2]) if s else None)" 2>&1 | tail -2
fi
if [ "${S4_PART:-1}" = 3 ]; then # the closing measures on the final code (after a tests stage, nothing to build)
  [ "${S4_TUNING:-0}" = 1 ] && s4_tuning
  for round in 1 2; do
    f45_request "bf16_$round" --warmup
    f45_request "fp8_$round" --precision fp8 --warmup
  done
  f45_dit bf16
  f45_dit fp8 --precision fp8
  echo "== bench vae: bf16 and fp8 with their PSNR against the exact decode, the fp8 decode's profile ($SECONDS s)"
  f45_vae bf16_psnr --vae-precision bf16 --psnr-vs-exact
  f45_vae fp8_psnr --vae-precision fp8 --psnr-vs-exact
  python3 -c "
import json
for t in ('bf16_psnr', 'fp8_psnr'):
    j = json.load(open('$OUT/f45_vae_' + t + '.json')); print(t, j.get('psnr_vs_exact'), j.get('kernels'))" 2>&1 | tail -2
  H3_VAE_PROFILE=1 timeout 150 $H3 bench vae --random-weights --vae-precision fp8 > "$OUT/s4_vae_fp8_profile.txt" 2>&1
  echo "profile rc=$?"; grep -v "^\[" "$OUT/s4_vae_fp8_profile.txt" | tail -25
  if [ "${S4_VAE:-}" != "" ]; then # the decode's fast paths in a whole request against fp8_2's exact decode
    for vp in $S4_VAE; do
      f45_request "fp8_vae$vp" --precision fp8 --warmup --vae-precision "$vp"
      s4_compare /tmp/h3-f45-fp8_2/request.mp4 "/tmp/h3-f45-fp8_vae$vp/request.mp4" "vae$vp"
    done
  fi
  # last (a kernel that hangs loses only this): the sparse kernels the engine does not pick
  f45_dit variants --vsa-variants
  python3 -c "
import json; j = json.load(open('$OUT/f45_dit_variants.json'))
for r in j['vsa']['runs']: print({k: r[k] for k in ('kept_fraction', 'sparse_tflops', 'fp8_tflops')}, r.get('variants'))" 2>&1 | tail -3
fi
echo "== device_s4 part ${S4_PART:-all} done ($SECONDS s)"
