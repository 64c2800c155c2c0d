# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_vae_decode.sh H3_TARGETS="h3-engine
# test_vae test_core"): issue #45's video decode — the CUDA decode tests (VaeCuda.*: the streamed frames through the
# double-buffered download equal the whole decode's), the bf16 and fp8 decodes' CPU tests, then bench vae at
# 1344x768x124 exact vs --vae-precision bf16 vs fp8, each whole and --stream (the request's path), interleaved over
# VD_ROUNDS rounds (default 2), with the roofline the bench states and the kernels the timed decode ran, then each
# lossy decode's frames against the exact one (--psnr-vs-exact, the same random weights and latents); VD_REQUEST=1
# also runs bench request --fasth3 with the exact, bf16 and fp8 decode (interleaved, one run each).
echo "== VaeCuda.* and the decode's CPU tests ($SECONDS s)"
timeout 240 $T/test_vae --gtest_filter='VaeCuda.*:VideoVae.*:VaeLayout.*' > "$OUT/vd_test_vae.log" 2>&1
echo "test_vae rc=$?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/vd_test_vae.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]|Failure|PSNR' "$OUT/vd_test_vae.log" | head -20
timeout 60 $T/test_core --gtest_filter='ChunkDownload.*' > "$OUT/vd_test_core.log" 2>&1
echo "test_core ChunkDownload rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/vd_test_core.log" | tr '\n' ' ')"
vd_bench() { # tag args...
  local tag=$1; shift
  timeout 150 $H3 bench vae --random-weights "$@" --json > "$OUT/vd_$tag.json" 2> "$OUT/vd_$tag.err"
  echo "bench vae $* rc=$?: $(python3 -c "
import json; j = json.load(open('$OUT/vd_$tag.json')); r = j['video_roofline']
print({'output': j['video_output'], 'precision': j['vae_precision'], 'seconds': round(j['video_decode_seconds'], 3),
       'tflops': round(r['achieved_tflops'], 1), 'bound_s': round(r['lower_bound_seconds'], 3),
       'of_bound': round(r['fraction_of_bound'], 3), 'peak_gib': round(j['video_peak_gib'], 2),
       'kernels': j.get('kernels', {}).get('decode'), 'psnr_vs_exact': j.get('psnr_vs_exact')})" 2>&1 | tail -1)"
}
for round in $(seq 1 "${VD_ROUNDS:-2}"); do
  echo "== bench vae round $round ($SECONDS s)"
  vd_bench "exact_$round"
  vd_bench "bf16_$round" --vae-precision bf16
  vd_bench "fp8_$round" --vae-precision fp8
  vd_bench "exact_stream_$round" --stream
  vd_bench "bf16_stream_$round" --vae-precision bf16 --stream
  vd_bench "fp8_stream_$round" --vae-precision fp8 --stream
done
echo "== bench vae --psnr-vs-exact: bf16 and fp8 frames against the exact f16 decode ($SECONDS s)"
vd_bench bf16_psnr --vae-precision bf16 --psnr-vs-exact
vd_bench fp8_psnr --vae-precision fp8 --psnr-vs-exact
if [ "${VD_REQUEST:-0}" = 1 ]; then
  for p in exact bf16 fp8; do
    echo "== bench request --fasth3 --vae-precision $p ($SECONDS s)"
    timeout 200 $H3 bench request --random-weights --fasth3 --size 1344x768 --frames 124 --device cuda \
      --vae-precision $p --work "/tmp/h3-vd-$p" --json > "$OUT/vd_request_$p.json" 2> "$OUT/vd_request_$p.err"
    echo "rc=$?"; tail -2 "$OUT/vd_request_$p.err"
    python3 -c "
import json; j = json.load(open('$OUT/vd_request_$p.json')); m = j.get('metrics', {})
print({k: j.get(k) for k in ('seconds_total', 'seconds_decode', 'seconds_mux')},
      'mux_encode', m.get('mux_encode_seconds'), 'decode gemms', m.get('kernels', {}).get('decode', {}).get('gemm'))" \
      2>&1 | tail -2
  done
fi
echo "== device_vae_decode done ($SECONDS s)"
