# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_lse_vsa.sh
# H3_TARGETS="h3-engine test_ops_attention_merge test_ops_vsa test_ops_fp8 test_dit_fp8"): issue #46's lse of the
# sm_90a kernels and issue #45's wgmma block-sparse kernels (bf16, e4m3) — the op tests on CUDA, the fp8 DiT
# with VSA, then the benches (the ring's partial attention with lse, sm_90a vs the fallback; bench dit with
# VSA 0.9, bf16 and fp8 with H3_LV_FP8=fp8; the one-rank ring path bf16 and fp8). H3_LV_PARTS picks parts:
# tests, vsatest (the VSA op tests alone), lse, vsa, ring (default: all but vsatest).
PARTS=${H3_LV_PARTS:-tests lse vsa ring}
lv_test() {  # name, log, args... (device_check.sh's run_test is defined after this script runs)
  local name=$1 log=$2; shift 2
  OMP_NUM_THREADS=16 timeout "${H3_LV_TEST_TIMEOUT:-200}" "$@" > "$OUT/$log" 2>&1; local rc=$?
  echo "$name rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$OUT/$log" | head -10
}
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
if has tests; then
  echo "== op tests on CUDA ($SECONDS s)"
  lv_test "test_ops_attention_merge" lv_merge.log $T/test_ops_attention_merge --backend cuda
  grep -E "Failure|lse\[|got .* want" "$OUT/lv_merge.log" | head -20
  lv_test "test_ops_vsa" lv_vsa.log $T/test_ops_vsa --backend cuda
  grep -E "Failure|outside|got .* want" "$OUT/lv_vsa.log" | head -20
  [ -x $T/test_dit_fp8 ] && lv_test "test_dit_fp8" lv_dit_fp8.log $T/test_dit_fp8
  grep -E "Failure|differs|cos " "$OUT/lv_dit_fp8.log" | head -10
  [ -x $T/test_ops_fp8 ] && lv_test "test_ops_fp8 (attention)" lv_fp8.log $T/test_ops_fp8 --backend cuda \
    --gtest_filter='*ttention*'
  echo "== the same op tests' CPU mode, the ring's CPU parity ($SECONDS s)"
  lv_test "test_ops_attention_merge (CPU)" lv_merge_cpu.log $T/test_ops_attention_merge
  lv_test "test_ops_vsa (CPU)" lv_vsa_cpu.log $T/test_ops_vsa
  grep -E "Failure|outside" "$OUT/lv_vsa_cpu.log" | head -5
  [ -x $T/test_parallel ] && lv_test "test_parallel (ring, parity)" lv_parallel.log $T/test_parallel \
    --gtest_filter='GroupRing.*:GroupParity.*'
fi
if has vsatest; then # the VSA op tests alone (after a kernel change)
  lv_test "test_ops_vsa" lv_vsa.log $T/test_ops_vsa --backend cuda
  grep -E "Failure|outside|got .* want" "$OUT/lv_vsa.log" | head -20
fi
if has lse; then
  echo "== bench attention --lse: the ring's partials, sm_90a vs fallback ($SECONDS s)"
  timeout 150 $H3 bench attention --seq 16384 --lse --fp8 --rounds 2 --only "${H3_LV_ONLY:-}" \
    > "$OUT/lv_attn_lse.txt" 2>&1; echo "rc=$?"; cat "$OUT/lv_attn_lse.txt"
fi
if has vsa; then
  for prec in bf16 ${H3_LV_FP8:-}; do
    echo "== bench dit --attention vsa:sparsity=0.9 ($prec, 2 blocks, 1344x768x124) ($SECONDS s)"
    pa=""; [ "$prec" = fp8 ] && pa="--precision fp8"
    # shellcheck disable=SC2086
    timeout 200 $H3 bench dit --random-weights --blocks 2 --iters 1 --frames 124 $pa \
      --attention vsa:sparsity=0.9 --vsa-scan ${H3_LV_SCAN:-0.1,1} --json > "$OUT/lv_dit_vsa_$prec.json" \
      2> "$OUT/lv_dit_vsa_$prec.err"; echo "rc=$?"; tail -3 "$OUT/lv_dit_vsa_$prec.err"
    python3 -c "
import json; j=json.load(open('$OUT/lv_dit_vsa_$prec.json'))
print({k: j.get(k) for k in ['precision','seconds_per_block','seconds_per_forward_50_blocks','attention_tflops']})
for r in j.get('vsa', {}).get('runs', []): print(r)" 2>&1 | tail -6
  done
fi
if has ring; then
  for pa in "" "--precision fp8"; do
    echo "== bench dit --sp 1 --tp 1 --ring 1 $pa (the ring path, 2 blocks) ($SECONDS s)"
    # shellcheck disable=SC2086
    timeout 150 $H3 bench dit --random-weights --blocks 2 --iters 1 --frames 124 --sp 1 --tp 1 --ring 1 $pa \
      --json > "$OUT/lv_ring.json" 2> "$OUT/lv_ring.err"; echo "rc=$?"; tail -2 "$OUT/lv_ring.err"
    python3 -c "import json; j=json.load(open('$OUT/lv_ring.json')); print({k: j.get(k) for k in ['precision','seconds_per_block','seconds_per_pass','attention_tflops','parallel']})" 2>&1 | tail -1
  done
fi
echo "== done ($SECONDS s)"
