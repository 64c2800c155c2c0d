#!/usr/bin/env bash
# --vae-precision exact | bf16 | fp8 end to end on the CPU (issue #45). One tiny request (same seed, same DiT)
# decoded exact (fp32 blocks on the CPU) and with bf16 blocks: the latents are identical, the MP4s differ but stay
# close (`compare`: finite PSNR >= 40 dB between the two encodes; measured 47.9 dB mean), the bf16 job's metrics
# name the decoder's bf16 placement and bf16 block GEMMs (the exact job's none). `decode --vae-precision bf16` of
# the saved latents gives generate's bf16 frames. Bad values are usage errors naming the flag in every command that
# takes it (generate, decode, serve, bench request, bench vae); bench vae and bench request with --vae-precision
# bf16 report bf16 blocks and the decode's bf16 GEMMs.
source "$(dirname "$0")/lib/common.sh" "$@"
# json_check FILE EXPR...: python asserts over j = the JSON in FILE
json_check() {
  local f=$1; shift
  python3 - "$f" "$@" <<'PY' || { cat "$f"; fail "json check: ${*}"; }
import json, math, sys
j = json.load(open(sys.argv[1]))
for expr in sys.argv[2:]:
    assert eval(expr, {"j": j, "math": math}), expr
PY
}

make_tiny "$WORK/tiny" --seed 1
GEN=("$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 64x32 --frames 107 --steps 2 --seed 4
     --progress none)
for p in exact bf16; do
  expect_rc 0 "${GEN[@]}" --vae-precision $p --output "$WORK/$p.mp4" --save-latents "$WORK/$p.st" \
    --metrics "$WORK/$p.json"
done
# the DiT is the same: identical latents
expect_rc 0 "$H3" compare "$WORK/exact.st" "$WORK/bf16.st" --json
json_check "$WORK/out.txt" 'all(t["snr_db"] == "inf" for t in j["latents"]["tensors"])'
# the decode differs, within the bound
expect_rc 0 "$H3" compare "$WORK/exact.mp4" "$WORK/bf16.mp4" --json --output "$WORK/cmp.json"
python3 -c 'import json, sys
print("vae_precision: bf16 vs exact video PSNR mean", json.load(open(sys.argv[1]))["video"]["psnr_mean"])' \
  "$WORK/cmp.json"
json_check "$WORK/cmp.json" 'j["video"]["frames"] == 107' \
  'isinstance(j["video"]["psnr_mean"], float) and 40 <= j["video"]["psnr_mean"]' \
  'j["video"]["identical_frames"] < 107'
# provenance: the plan and the decode's GEMMs
json_check "$WORK/bf16.json" '"vae_decoder per_job cpu bf16" in j["placement"]' \
  'j["kernels"]["decode"]["gemm"].get("cpu-bf16", 0) > 0' 'j["fallbacks"] == []'
json_check "$WORK/exact.json" '"vae_decoder per_job cpu," in j["placement"]' \
  '"cpu-bf16" not in j["kernels"]["decode"]["gemm"]'

# decode of the saved latents with bf16 blocks: generate's bf16 frames
expect_rc 0 "$H3" decode --model "$WORK/tiny" --latents "$WORK/bf16.st" --vae-precision bf16 --output "$WORK/d.mp4"
expect_rc 0 "$H3" compare "$WORK/bf16.mp4" "$WORK/d.mp4" --json
json_check "$WORK/out.txt" 'j["video"]["psnr_mean"] == "inf"'

# bad values: usage errors naming the flag, before anything runs
expect_rc 2 "${GEN[@]}" --vae-precision bf17 --output "$WORK/x.mp4"; expect_err "--vae-precision"
# dtype fp16 is for GPUs without bf16: bf16 blocks are refused there, naming the flag
expect_rc 2 "${GEN[@]}" --dtype fp16 --vae-precision bf16 --output "$WORK/x.mp4"
expect_err "--vae-precision bf16 runs bf16 blocks"
expect_rc 2 "$H3" decode --model "$WORK/tiny" --latents "$WORK/bf16.st" --vae-precision fp16 --output "$WORK/x.mp4"
expect_err "--vae-precision"
expect_rc 2 "$H3" serve --model "$WORK/tiny" --vae-precision BF16; expect_err "--vae-precision"
expect_rc 2 "$H3" bench request --random-weights --device cpu --vae-precision f16; expect_err "--vae-precision"
VAE=(bench vae --random-weights --config "$WORK/tiny/vae/config.json" --device cpu --size 64x32 --frames 22 --json)
expect_rc 2 "$H3" "${VAE[@]}" --vae-precision bf; expect_err "--vae-precision"
[ ! -e "$WORK/x.mp4" ] || fail "a refused request wrote x.mp4"

# bench vae: bf16 blocks (--dtype ignored) and their GEMMs in the timed decode's provenance, the frames against
# the exact decode of the same random weights (measured 71.1 dB; one run: its audio decoder is the official one,
# ~30 s on 2 cores); --psnr-vs-exact needs bf16 or fp8
expect_rc 0 "$H3" "${VAE[@]}" --vae-precision bf16 --dtype f32 --psnr-vs-exact; cp "$WORK/out.txt" "$WORK/vae.json"
json_check "$WORK/vae.json" 'j["vae_precision"] == "bf16" and j["dtype"] == "bf16"' \
  'j["kernels"]["decode"]["gemm"].get("cpu-bf16", 0) > 0' '"cpu-fp32" in j["kernels"]["decode"]["gemm"]' \
  '"cpu-fp16" not in j["kernels"]["decode"]["gemm"] and "cpu-bf16" not in j["kernels"]["exact"]["gemm"]' \
  'j["psnr_vs_exact"]["exact_dtype"] == "f32" and isinstance(j["psnr_vs_exact"]["psnr_db"], float)' \
  '55 <= j["psnr_vs_exact"]["psnr_db"]'
expect_rc 2 "$H3" "${VAE[@]}" --psnr-vs-exact; expect_err "--psnr-vs-exact"
# bench request: the request's decoder (random weights) with bf16 blocks, named in its JSON and metrics
expect_rc 0 "$H3" bench request --random-weights --configs "$WORK/tiny" --device cpu --size 64x32 --frames 107 \
  --steps 2 --vae-precision bf16 --work "$WORK/br" --json
json_check "$WORK/out.txt" 'j["vae_precision"] == "bf16"' \
  '"vae_decoder per_job cpu bf16" in j["metrics"]["placement"]' \
  'j["metrics"]["kernels"]["decode"]["gemm"].get("cpu-bf16", 0) > 0'
# auto (the default) follows the DiT: e4m3 block GEMMs in the decode under --precision fp8 (named in bench
# request's JSON), the reference's decoder under bf16; an explicit value wins
expect_rc 0 "$H3" bench request --random-weights --configs "$WORK/tiny" --device cpu --size 64x32 --frames 107 \
  --steps 2 --precision fp8 --work "$WORK/b8" --json
json_check "$WORK/out.txt" 'j["vae_precision"] == "fp8"' \
  '"vae_decoder per_job cpu fp8" in j["metrics"]["placement"]' \
  'j["metrics"]["kernels"]["decode"]["gemm"].get("cpu-e4m3", 0) > 0'
expect_rc 0 "${GEN[@]}" --precision fp8 --vae-precision exact --output "$WORK/f8x.mp4" --metrics "$WORK/f8x.json"
json_check "$WORK/f8x.json" '"vae_decoder per_job cpu," in j["placement"]' \
  '"cpu-e4m3" not in j["kernels"]["decode"]["gemm"]' 'j["kernels"]["denoise"]["gemm"].get("cpu-e4m3", 0) > 0'
expect_rc 0 "${GEN[@]}" --output "$WORK/auto.mp4" --metrics "$WORK/auto.json"
json_check "$WORK/auto.json" '"vae_decoder per_job cpu," in j["placement"]'
expect_rc 0 "$H3" compare "$WORK/exact.mp4" "$WORK/auto.mp4" --json
json_check "$WORK/out.txt" 'j["video"]["psnr_mean"] == "inf"'
echo "vae_precision: all checks passed"
