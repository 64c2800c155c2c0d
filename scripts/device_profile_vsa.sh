#!/usr/bin/env bash
# Nsight Compute profile of VSA's block-sparse attention on Hopper (issue #45): one launch each of the bf16 and
# e4m3 wgmma kernels (bsa_bf16_sm90, bsa_fp8_sm90) and of their gather / quantization passes, in a one-block
# full-width DiT forward at 1344x768x124 with --attention vsa:sparsity=0.9 (the forward's own selection, so
# the visited tile pairs are the ones a request visits). Speed of light, memory workload (L2 and DRAM
# throughput: how close the K/V tile loads are to the L2's rate), warp stalls, tensor-pipe activity. Run from
# the repo root on the GPU machine with $OUT set, after a build into build-gpu/ (device_check.sh); sourced by
# device_check.sh's custom stage or run alone. ncu needs the GPU's performance counters.
set -u
OUT=${OUT:-/tmp/h3-device-out}
mkdir -p "$OUT"
H3=./build-gpu/src/cli/h3-engine
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
cuobjdump -sass build-gpu/src/ops/CMakeFiles/h3_ops.dir/cuda/vsa_attention_hopper.cu.o 2> /dev/null |
  xz -1 > "$OUT/sass_vsa_attention_hopper.xz"
if [ -z "$NCU" ]; then echo "profile_vsa: no ncu on this machine"; return 0 2>/dev/null || exit 0; fi
for prec in bf16 fp8; do
  kernels="bsa_bf16_sm90|bsa_gather_kernel"; pa=""
  [ "$prec" = fp8 ] && { kernels="bsa_fp8_sm90|bsa_fp8_quant_kernel|bsa_fp8_amax_kernel"; pa="--precision fp8"; }
  echo "== ncu: VSA $prec kernels ($kernels) ($SECONDS s)"
  # shellcheck disable=SC2086
  timeout 240 "$NCU" --clock-control none --kernel-name "regex:$kernels" --launch-count 3 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,dram__bytes_read.sum.per_second,lts__t_sector_hit_rate.pct,sm__cycles_elapsed.avg.per_second \
    "$H3" bench dit --random-weights --blocks 1 --iters 1 --frames 124 $pa --attention vsa:sparsity=0.9 \
    --vsa-scan 0.1 --json > "$OUT/ncu_vsa_$prec.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "ERR_|^  [a-z_0-9]+.*\(|Duration|SM Frequency|Memory Throughput|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|gmma|lts__t_bytes|dram__bytes_read|hit_rate|Achieved Occupancy|Warp Cycles Per Issued|No Eligible" \
    "$OUT/ncu_vsa_$prec.txt" | head -70
done
