# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_block_ops.sh
# H3_TARGETS=h3-engine): the per-op device time of one DiT block at 1344x768x124 (bench dit's phase timer:
# events between the ops), with VSA 0.9 in bf16 and fp8 and dense bf16 — where a FastH3 forward's block time
# goes besides its GEMMs and attention (issue #45).
for cfg in "vsa bf16" "vsa fp8" "dense bf16"; do
  set -- $cfg
  att=""; [ "$1" = vsa ] && att="--attention vsa:sparsity=0.9"
  pa=""; [ "$2" = fp8 ] && pa="--precision fp8"
  echo "== bench dit $att $pa (2 blocks, 1344x768x124) ($SECONDS s)"
  # shellcheck disable=SC2086
  timeout 150 $H3 bench dit --random-weights --blocks 2 --iters 2 --frames 124 $pa $att --json \
    > "$OUT/bo_$1_$2.json" 2> "$OUT/bo_$1_$2.err"; echo "rc=$?"; tail -2 "$OUT/bo_$1_$2.err"
  python3 -c "
import json; j=json.load(open('$OUT/bo_$1_$2.json'))
print({k: j.get(k) for k in ['precision','seconds_per_block','seconds_per_forward_50_blocks']})
ops = j.get('per_op_seconds_per_block', {})
print('per_op_ms', {k: round(v * 1e3, 3) for k, v in sorted(ops.items(), key=lambda kv: -kv[1])})
print('sum_ms', round(sum(ops.values()) * 1e3, 3))" 2>&1 | tail -3
done
