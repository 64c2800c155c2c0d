# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_s7.sh H3_TARGETS="h3-engine h3-bench"):
# issue #45 in the seventh session of 2026-12-07, in two parts that each fit a 600 s call (S7_PART), most
# needed first (a call that runs out of time loses the tail):
#   a. after a tests stage: bench request --fasth3 --warmup fp8 / bf16, each as a warm server's job
#      (--keep-loaded: DiT and decoders kept) and as generate's per-job flow, two interleaved rounds of the fp8
#      pair (fp8's video decoder is vae_precision auto: fp8); bench dit VSA fp8 / bf16 (separate gate add).
#   b. bench dit VSA fp8 / bf16 with gate_add=fused and the scan; the Nsight Compute sections
#      of VSA's small kernels; fp8 with the exact decoder; bench vae fp8 against the exact decode; the second
#      round of the bf16 pair.
S6_PART=none source scripts/device_s6.sh
if [ "${S7_PART:-a}" = a ]; then
  f45_request fp8_kept_1 --precision fp8 --warmup --keep-loaded
  f45_request fp8_1 --precision fp8 --warmup
  f45_request bf16_1 --warmup
  s6_dit fp8 vsa:sparsity=0.9 --precision fp8
  s6_dit bf16 vsa:sparsity=0.9
  f45_request fp8_kept_2 --precision fp8 --warmup --keep-loaded
  f45_request fp8_2 --precision fp8 --warmup
  f45_request bf16_kept_1 --warmup --keep-loaded
fi
if [ "${S7_PART:-a}" = b ]; then
  s6_dit fp8_fused vsa:sparsity=0.9,gate_add=fused --precision fp8 --vsa-scan 0.1
  s6_dit bf16_fused vsa:sparsity=0.9,gate_add=fused --vsa-scan 0.1
  s6_ncu_vsa
  f45_request fp8_vaeexact --precision fp8 --vae-precision exact --warmup
  f45_vae_psnr fp8 --vae-precision fp8
  f45_request bf16_kept_2 --warmup --keep-loaded
  f45_request bf16_2 --warmup
fi
echo "== device_s7 part ${S7_PART:-a} done ($SECONDS s)"
