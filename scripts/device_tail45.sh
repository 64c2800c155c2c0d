# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_tail45.sh) after a tests stage
# on the same machine (nothing to build): the fused fp8 + VSA CUDA check, then issue #45's decode variants
# (bench vae exact f16, bf16 blocks, fp8 blocks) and, while T45_UNTIL seconds of the call remain, the fp8 + VSA
# velocity cosine (bench fp8 --attention vsa:sparsity=0.9).
source scripts/device_final45.sh --functions-only 2>/dev/null || true
echo "== test_dit_fp8 CUDA ($SECONDS s)"
timeout 120 $T/test_dit_fp8 --gtest_filter='*Cuda*' > "$OUT/t45_dit_fp8.log" 2>&1
echo "test_dit_fp8 rc=$?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/t45_dit_fp8.log" | tr '\n' ' ')"
echo "== bench vae ($SECONDS s)"
f45_vae exact
f45_vae fp8 --vae-precision fp8
f45_vae bf16 --dtype bf16
if [ "$SECONDS" -lt "${T45_UNTIL:-60}" ]; then
  echo "== bench fp8 --attention vsa:sparsity=0.9 ($SECONDS s)"
  timeout 150 $H3 bench fp8 --random-weights --attention vsa:sparsity=0.9 --json > "$OUT/t45_fp8_vsa.json" \
    2> "$OUT/t45_fp8_vsa.err"; echo "rc=$?"; tail -3 "$OUT/t45_fp8_vsa.err"
  python3 -c "
import json; j = json.load(open('$OUT/t45_fp8_vsa.json'))
for v in j.get('variants', []):
    print({k: v.get(k) for k in v if not isinstance(v.get(k), (dict, list))}, 'fallbacks', v.get('fallbacks'))" 2>&1 | tail -6
fi
echo "== device_tail45 done ($SECONDS s)"
