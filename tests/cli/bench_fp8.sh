#!/usr/bin/env bash
# h3-engine bench fp8 at the tiny checkpoint's width on the CPU (the simulated e4m3 path): dense, and with
# --attention vsa (random compression gates, issue #45's "fp8 and VSA together"): every fp8 forward against
# bf16 VSA within the fp8 bound, the gates as e4m3 GEMMs on the fused rows (no fallback) except in the
# variant that keeps them in bf16 (one fallback, its reason); a bad --attention names the field.
source "$(dirname "$0")/lib/common.sh" "$@"
make_tiny "$WORK/tiny" --seed 1
FP8=(bench fp8 --random-weights --config "$WORK/tiny/transformer/config.json" --device cpu --size 64x32
     --frames 22 --text 8 --blocks 2)
expect_rc 0 "$H3" "${FP8[@]}" --json; cp "$WORK/out.txt" "$WORK/dense.json"
expect_rc 0 "$H3" "${FP8[@]}" --json --attention vsa:sparsity=0.5; cp "$WORK/out.txt" "$WORK/vsa.json"
python3 - "$WORK/dense.json" "$WORK/vsa.json" <<'PY' || fail "bench fp8 report"
import json, sys
dense, vsa = (json.load(open(p)) for p in sys.argv[1:])
assert dense["attention"] == "dense" and len(dense["variants"]) == 3, dense
assert "sparse_attention" not in dense["bf16_kernels"]["job"], dense["bf16_kernels"]
assert vsa["attention"].startswith("vsa(sparsity=0.5"), vsa["attention"]
assert vsa["bf16_kernels"]["job"]["sparse_attention"], vsa["bf16_kernels"]
assert len(vsa["variants"]) == 4, [v["name"] for v in vsa["variants"]]
blocks = vsa["blocks"]
for r in (dense, vsa):
    for v in r["variants"]:
        assert v["video_cosine"] > 0.9995 and v["video_rel_rms"] < 0.02, (r["attention"], v["name"], v)
        assert v["audio_cosine"] > 0.9995 and v["audio_rel_rms"] < 0.02, (r["attention"], v["name"], v)
        k = v["kernels"]["job"]
        assert k["gemm"]["cpu-e4m3"] > 0 and k["fp8_quantization"]["fused"] > 0, (v["name"], k)
*fused_runs, bf16_gates = vsa["variants"]
for v in fused_runs:
    assert v["fallbacks"] == [], (v["name"], v["fallbacks"])
    assert v["kernels"]["job"]["sparse_attention"], v["kernels"]
# the same exceptions with and without e4m3 gates: one e4m3 GEMM per block more, one bf16 GEMM fewer
a, b = fused_runs[0]["kernels"]["job"]["gemm"], bf16_gates["kernels"]["job"]["gemm"]
assert a["cpu-e4m3"] == b["cpu-e4m3"] + blocks and a["cpu-bf16"] == b["cpu-bf16"] - blocks, (a, b)
assert [f["family"] for f in bf16_gates["fallbacks"]] == ["fp8_quantization"], bf16_gates["fallbacks"]
assert "compression gate" in bf16_gates["fallbacks"][0]["why"], bf16_gates["fallbacks"]
PY
# the text report names the attention and each variant's quantization
expect_rc 0 "$H3" "${FP8[@]}" --attention vsa:sparsity=0.5
grep -q "attention vsa(sparsity=0.5" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "text: attention"; }
grep -q "quantization fused" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "text: quantization"; }
grep -q "fallback fp8_quantization: unfused instead of fused" "$WORK/out.txt" ||
  { cat "$WORK/out.txt"; fail "text: the bf16 gates' fallback"; }
expect_rc 2 "$H3" "${FP8[@]}" --attention vsa:sparsity=1.5; expect_err "sparsity 1.5"
echo "bench_fp8: all checks passed"
