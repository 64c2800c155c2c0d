#!/usr/bin/env bash
# FastH3 end to end on the CPU: `make-tiny --variant fasth3` (per-block attn.to_gate_compress + the sidecar
# fastvideo_inference.json), then `generate` with the sidecar's defaults — the 4-forward rung schedule and VSA
# at sparsity 0.9 — to an MP4; --attention and --steps override them; bad --attention specs and VSA with ref2va
# are usage errors before anything is loaded; `bench dit --attention vsa` runs on a tiny config.
source "$(dirname "$0")/lib/common.sh" "$@"

expect_rc 0 "$H3" make-tiny "$WORK/fast" --seed 5 --variant fasth3
grep -q '"VIDEO_SPARSE_ATTN_H3"' "$WORK/fast/fastvideo_inference.json" || fail "no sidecar"
grep -q 'to_gate_compress' "$WORK/fast/transformer/diffusion_pytorch_model.safetensors.index.json" ||
  fail "the student has no compression gates"
expect_rc 2 "$H3" make-tiny "$WORK/orig" --variant fasth3 --layout original; expect_err "diffusers layout only"

GEN=("$H3" generate --model "$WORK/fast" --random-prompt-embeds 7 --size 64x32 --frames 107 --seed 4 --progress none)
# ---- the sidecar's defaults: 4 forwards on the rungs, VSA 0.9; an MP4 through the tiny VAEs
expect_rc 0 "${GEN[@]}" --output "$WORK/fast.mp4" --save-latents "$WORK/vsa.st"
expect_err "5 steps (4 forwards, FastH3 rungs)"; expect_err "attention vsa(sparsity=0.9,mode=exempt)"
expect_err "4 forwards in"
[ -s "$WORK/fast.mp4" ] && head -c 12 "$WORK/fast.mp4" | grep -q ftyp || fail "no MP4"
# deterministic, and the attention matters: dense and compete give other latents
expect_rc 0 "${GEN[@]}" --save-latents "$WORK/vsa2.st"
cmp -s "$WORK/vsa.st" "$WORK/vsa2.st" || fail "the same request gave other latents"
expect_rc 0 "${GEN[@]}" --attention dense --save-latents "$WORK/dense.st"; expect_err "attention dense"
cmp -s "$WORK/vsa.st" "$WORK/dense.st" && fail "VSA and dense attention gave the same latents"
expect_rc 0 "${GEN[@]}" --attention vsa:sparsity=0.5,mode=compete,dense_first_n_steps=1 --save-latents "$WORK/c.st"
expect_err "vsa(sparsity=0.5,mode=compete,dense_first_n_steps=1)"
cmp -s "$WORK/vsa.st" "$WORK/c.st" && fail "compete gave the exempt latents"
# --steps overrides the rung schedule
expect_rc 0 "${GEN[@]}" --steps 3 --save-latents "$WORK/s3.st"; expect_err "3 steps (2 forwards)"

# ---- usage errors, named, before the model loads
expect_rc 2 "${GEN[@]}" --attention vsa:sparsity=1.5 --save-latents "$WORK/x.st"; expect_err "sparsity 1.5"
expect_rc 2 "${GEN[@]}" --attention sparse --save-latents "$WORK/x.st"; expect_err "must be dense or vsa"
expect_rc 2 "${GEN[@]}" --attention vsa:dense_layers=9 --save-latents "$WORK/x.st"; expect_err "dense_layers holds block 9"
expect_rc 0 "$H3" generate --model "$WORK/fast" --prompt "waves" --size 64x32 --frames 107 --steps 2 --seed 2 \
  --attention dense --output "$WORK/voice.wav" --progress none
IMG="$(cd "$(dirname "$0")/../data/images" && pwd)"
expect_rc 2 "$H3" generate --model "$WORK/fast" --prompt "x" --size 64x32 --frames 107 --attention vsa \
  --reference "$IMG/png_rgb.png" --reference "$WORK/voice.wav" --reference-image-edge 64 --output "$WORK/o.mp4"
expect_err "ref2va is not supported"
# fl2va under VSA: both keyframes are one prefix segment; with a step cache too
expect_rc 0 "$H3" generate --model "$WORK/fast" --prompt "a fox" --size 64x32 --frames 107 --first-frame \
  "$IMG/png_rgb.png" --last-frame "$IMG/jpeg_444.jpg" --save-latents "$WORK/fl.st" --progress none
expect_err "attention vsa(sparsity=0.9"; [ -s "$WORK/fl.st" ] || fail "fl2va under VSA wrote no latents"
expect_rc 0 "${GEN[@]}" --cache dbcache:Fn=1,Bn=0,rdt=0.3,warmup=1 --save-latents "$WORK/cached.st"
# a broken sidecar is bad input naming the file and the field
sed 's/"vsa_tile_size": 64/"vsa_tile_size": 256/' "$WORK/fast/fastvideo_inference.json" >"$WORK/s.json"
mv "$WORK/s.json" "$WORK/fast/fastvideo_inference.json"
expect_rc 3 "${GEN[@]}" --save-latents "$WORK/x.st"; expect_err "vsa_tile_size 256"

# ---- bench dit --attention vsa on a tiny config (CPU): blocks with gates and the kept-fraction scan
expect_rc 0 "$H3" bench dit --config "$WORK/fast/transformer/config.json" --random-weights --device cpu \
  --size 128x64 --frames 107 --text 9 --blocks 2 --iters 1 --attention vsa:sparsity=0.75,gate_add=fused --vsa-scan 0.25,1 --vsa-variants --attention-candidates --json
python3 - "$WORK/out.txt" <<'PY' || fail "bench dit --attention vsa json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["attention"].startswith("vsa(sparsity=0.75"), j["attention"]
v = j["vsa"]
assert v["video_tiles"] == 8 * 1 * 1 and v["prefix_tiles"] == 1 + 6, v
runs = {r["kept_fraction"]: r for r in v["runs"]}
assert runs[1.0]["keep"] == 8 and runs[0.25]["keep"] == 2, runs
assert runs[1.0]["vs_all_tiles"] == 1.0 and runs[0.25]["visited_tile_fraction"] < 1.0, runs
assert all(0 < r["top_k_seconds"] <= r["select_seconds"] for r in v["runs"]), runs
assert all(r["gated_seconds"] > 0 and r["fp8_gated_seconds"] == 0 for r in v["runs"]), runs  # fp8: CUDA only
assert all(r["variants"] == {} for r in v["runs"]), runs  # the CUDA-only kernels: none on the CPU
# VSA's small kernels one by one (the selection phase's and the compression branch's)
assert sorted(v["phase_seconds"]) == ["compress_tiles", "gate_add", "pool_one_input", "pool_qkv", "tile_scores"], v
assert all(s > 0 for s in v["phase_seconds"].values()), v["phase_seconds"]
# dense attention alone on the last block's own q, k, v, and every candidate on them (the CPU has one)
assert j["attention_seconds_forward_data"] > 0, j
assert list(j["attention_candidates_tflops_forward_data"]) == ["cpu"], j
assert j["attention_candidates_tflops_forward_data"]["cpu"] > 0, j
# the kernels the bench ran (issue #45 provenance): the CPU's sparse and dense attention and fp32 GEMMs
k = j["kernels"]["job"]
assert list(k["sparse_attention"]) == ["cpu"] and k["sparse_attention"]["cpu"] > 0, k
assert k["dense_attention"]["cpu"] > 0 and k["gemm"]["cpu-fp32"] > 0, k
assert j["fallbacks"] == [], j["fallbacks"]
# the per-op breakdown splits VSA's attention into its parts (the sparse blocks run with their gates)
ops = j["per_op_seconds_per_block"]
for phase in ("vsa_pool_scores", "vsa_select", "vsa_sparse_attention", "vsa_gate_gemm", "vsa_compression"):
    assert ops.get(phase, 0) > 0, (phase, ops)
# issue #45's measure: selection and compression (every vsa_* phase but the attention and the gate's GEMM)
over = sum(s for p, s in ops.items() if p.startswith("vsa_") and
           p not in ("vsa_sparse_attention", "vsa_dense_attention", "vsa_gate_gemm"))
assert abs(j["vsa_overhead_seconds_per_block"] - over) <= 1e-9 * max(1.0, over), (j["vsa_overhead_seconds_per_block"], ops)
assert 0 < j["vsa_overhead_fraction"] < 1, j["vsa_overhead_fraction"]
assert abs(j["vsa_overhead_fraction"] * j["seconds_per_block"] - over) <= 1e-6 * j["seconds_per_block"], j
# plus the gate add's cost inside the sparse attention: the scan's gated run over the plain one at the blocks'
# keep (0.25 of 8 video tiles: keep 2, which the scan times)
# (gated_plain_seconds: the plain run timed beside the gated one, plain/gated/gated/plain)
assert all(r["gated_plain_seconds"] > 0 for r in v["runs"]), runs
gated = runs[0.25]["gated_seconds"] - runs[0.25]["gated_plain_seconds"]
assert abs(j["vsa_fused_gate_add_seconds"] - max(0.0, gated)) <= 1e-12, (j["vsa_fused_gate_add_seconds"], gated)
assert abs(j["vsa_overhead_with_fused_gate_fraction"] * j["seconds_per_block"] -
           (over + j["vsa_fused_gate_add_seconds"])) <= 1e-6 * j["seconds_per_block"], j
PY
# the default, gate_add=separate: the gate add is a pass of its own, timed in vsa_compression (no fused cost to
# add back)
expect_rc 0 "$H3" bench dit --config "$WORK/fast/transformer/config.json" --random-weights --device cpu \
  --size 128x64 --frames 107 --text 9 --blocks 2 --iters 1 --attention vsa:sparsity=0.75,gate_add=separate --json
python3 - "$WORK/out.txt" <<'PY' || fail "bench dit --attention vsa:...,gate_add=separate json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["attention"] == "vsa(sparsity=0.75,mode=exempt)", j["attention"]
assert j["vsa_fused_gate_add_seconds"] == 0, j
assert j["vsa_overhead_with_fused_gate_fraction"] == j["vsa_overhead_fraction"] > 0, j
assert j["per_op_seconds_per_block"].get("vsa_compression", 0) > 0, j["per_op_seconds_per_block"]
PY
expect_rc 2 "$H3" bench dit --config "$WORK/fast/transformer/config.json" --random-weights --device cpu \
  --size 128x64 --frames 107 --text 9 --blocks 2 --iters 1 --attention vsa:gate_add=later
expect_err "gate_add 'later' must be fused or separate"
echo "fasth3: ok"
