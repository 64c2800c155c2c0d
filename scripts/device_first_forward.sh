# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_first_forward.sh
# H3_TARGETS=h3-engine): what the first forward of a FastH3 request pays (issue #45's first-step penalty) —
# bench request --fasth3 bf16 with and without the GEMM autotuner, fp8 once, and (where Nsight Systems is on
# the machine) the CUDA API and kernel summaries of one bf16 request; then the video decode's phases
# (H3_VAE_PROFILE=1 bench vae).
ff_request() { # tag env... -- args...
  local tag=$1; shift
  echo "== bench request --fasth3 $* ($tag) ($SECONDS s)"
  env "$@" timeout 200 $H3 bench request --random-weights --fasth3 --size 1344x768 --frames 124 --device cuda \
    ${FF_ARGS:-} --work "/tmp/h3-ff-$tag" --json > "$OUT/ff_$tag.json" 2> "$OUT/ff_$tag.err"
  echo "rc=$?"; tail -2 "$OUT/ff_$tag.err"
  python3 -c "import json; j=json.load(open('$OUT/ff_$tag.json')); print({k: j.get(k) for k in ('seconds_total','seconds_denoise_setup','seconds_decode','seconds_mux')}); print('step_seconds', j.get('step_seconds'))" 2>&1 | tail -2
}
ff_request bf16 H3_FF=1
ff_request bf16_untuned H3_GEMM_AUTOTUNE=0
FF_ARGS="--precision fp8" ff_request fp8 H3_FF=1
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  echo "== nsys bench request --fasth3 bf16 ($SECONDS s)"
  timeout 240 "$NSYS" profile -t cuda,nvtx,osrt -o /tmp/ff_nsys --force-overwrite true \
    $H3 bench request --random-weights --fasth3 --size 1344x768 --frames 124 --device cuda --work /tmp/h3-ff-nsys \
    --json > "$OUT/ff_nsys.json" 2> "$OUT/ff_nsys.err"; echo "rc=$?"
  timeout 120 "$NSYS" stats -r cuda_api_sum,cuda_gpu_kern_sum -f csv -o "$OUT/ff_nsys" /tmp/ff_nsys.nsys-rep \
    > /dev/null 2>&1; echo "stats rc=$?"
  head -25 "$OUT"/ff_nsys_cuda_api_sum.csv 2>/dev/null
else
  echo "== no nsys on this machine"
fi
echo "== H3_VAE_PROFILE=1 bench vae ($SECONDS s)"
H3_VAE_PROFILE=1 timeout 120 $H3 bench vae --random-weights --json > "$OUT/ff_vae.json" 2> "$OUT/ff_vae.err"
echo "rc=$?"; grep "vae profile" "$OUT/ff_vae.err" | awk '{s[$4]+=$5} END {for (k in s) printf "%s %.3f\n", k, s[k]}' | sort -k2 -nr
