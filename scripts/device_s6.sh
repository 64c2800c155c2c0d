# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_s6.sh H3_TARGETS="h3-engine ..."):
# issue #45 in the sixth session of 2026-12-07, in parts that each fit a 600 s call (S6_PART):
#   ab. the GPU tests named in S6_TESTS ("binary:filter ..."), then bench dit VSA with the compression branch's
#       gate add fused into the sparse kernel against its own pass (--attention vsa:...,gate_add=separate),
#       fp8 and bf16, in two interleaved rounds; then Nsight Compute's throughput, occupancy and stall sections
#       for VSA's small kernels of one fp8 block (what bounds them).
#   final. the closing measures (after a tests stage): bench dit VSA fp8 / bf16, the default (separate gate
#       add) and gate_add=fused, bench request --fasth3 --warmup bf16 / fp8 in two interleaved rounds (fp8: the
#       fp8 video decoder, vae_precision auto), fp8 with the exact decoder, bench vae fp8 against the exact
#       decode, then the ncu sections of part ab.
source scripts/device_final45.sh --functions-only
s6_dit() { # tag attention args...: bench dit on 2 full-width blocks, its VSA share and per-op split
  local tag=$1 attn=$2; shift 2
  echo "== bench dit --attention $attn $* ($tag) ($SECONDS s)"
  timeout 200 $H3 bench dit --random-weights --blocks 2 --iters 2 --frames 124 --attention "$attn" "$@" --json \
    > "$OUT/s6_dit_$tag.json" 2> "$OUT/s6_dit_$tag.err"; echo "rc=$?"
  python3 - "$OUT/s6_dit_$tag.json" <<'PY' 2>&1 | tail -4
import json, sys
j = json.load(open(sys.argv[1]))
ops = j.get("per_op_seconds_per_block", {})
ms = lambda v: round(v * 1e3, 3)
print("block_ms", ms(j.get("seconds_per_block", 0)), "forward_s", round(j.get("seconds_per_forward_50_blocks", 0), 3),
      "vsa_overhead_ms", ms(j.get("vsa_overhead_seconds_per_block", 0)),
      "fraction", round(j.get("vsa_overhead_fraction", 0), 4),
      "with_fused_gate", round(j.get("vsa_overhead_with_fused_gate_fraction", -1), 4),
      "fused_gate_add_ms", ms(j.get("vsa_fused_gate_add_seconds", 0)))
print("per_op_ms", {k: ms(v) for k, v in sorted(ops.items(), key=lambda kv: -kv[1]) if k.startswith("vsa_")})
for run in j.get("vsa", {}).get("runs", []):
    print("scan", {k: (ms(v) if k.endswith("seconds") else v) for k, v in run.items()
                   if k in ("sparse_attention_seconds", "gated_plain_seconds", "gated_seconds", "fp8_seconds",
                            "fp8_gated_seconds", "sparse_tflops", "fp8_tflops")},
          "phases_ms", {k: ms(v) for k, v in j["vsa"].get("phase_seconds", {}).items()})
PY
}
s6_ncu_vsa() { # VSA's small kernels in one fp8 block: throughput, occupancy, stalls
  export PATH=/usr/local/cuda/bin:$PATH
  local ncu; ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -z "$ncu" ] && { echo "s6: no ncu"; return 0; }
  echo "== ncu sections: VSA small kernels, one fp8 block ($SECONDS s)"
  timeout 240 "$ncu" --clock-control none -k 'regex:vsa_(compress|scores|pool|select|gate_add)' -c 12 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis \
    "$H3" bench dit --random-weights --blocks 1 --iters 1 --frames 124 --attention vsa:sparsity=0.9 \
    --precision fp8 > "$OUT/s6_ncu_vsa.txt" 2> "$OUT/s6_ncu_vsa.err"
  echo "ncu rc=$?"; tail -2 "$OUT/s6_ncu_vsa.err"
  grep -E "^  [a-z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Block Limit|Warp Cycles Per Issued|Grid Size|Waves Per SM" \
    "$OUT/s6_ncu_vsa.txt" | sed -E 's/ +/ /g' | head -120
}
if [ "${S6_PART:-ab}" = ab ]; then
  for t in ${S6_TESTS:-}; do f45_test "${t%%:*}" "${t#*:}"; done
  for round in 1 2; do
    s6_dit "fp8_fused_$round" vsa:sparsity=0.9 --precision fp8 --vsa-scan 0.1
    s6_dit "fp8_separate_$round" vsa:sparsity=0.9,gate_add=separate --precision fp8
    s6_dit "bf16_fused_$round" vsa:sparsity=0.9 --vsa-scan 0.1
    s6_dit "bf16_separate_$round" vsa:sparsity=0.9,gate_add=separate
  done
  s6_ncu_vsa
fi
if [ "${S6_PART:-ab}" = final ]; then # most needed first: a call that runs out of time loses the tail
  s6_dit fp8 vsa:sparsity=0.9 --precision fp8
  s6_dit fp8_fused vsa:sparsity=0.9,gate_add=fused --precision fp8 --vsa-scan 0.1
  s6_dit bf16 vsa:sparsity=0.9
  s6_dit bf16_fused vsa:sparsity=0.9,gate_add=fused --vsa-scan 0.1
  for round in ${S6_ROUNDS:-1 2}; do
    f45_request "bf16_$round" --warmup
    f45_request "fp8_$round" --precision fp8 --warmup
  done
  f45_request fp8_kept --precision fp8 --warmup --keep-loaded # as a warm server's job: DiT and decoders kept
  f45_request bf16_kept --warmup --keep-loaded
  f45_request fp8_vaeexact --precision fp8 --vae-precision exact --warmup # the decoder before "auto"
  f45_vae_psnr fp8 --vae-precision fp8
  s6_ncu_vsa
fi
[ "${S6_PART:-ab}" = none ] || echo "== device_s6 part ${S6_PART:-ab} done ($SECONDS s)"
