#!/usr/bin/env bash
# Nsight Compute profile of the DiT-shape attention kernels (S = 38,247, 56 heads, head dim 128) on the GPU
# machine, from the repo root with $OUT set, after a build into build-gpu/ (device_check.sh). One launch of
# each kernel named in H3_PROFILE_KERNELS (regexes on mangled names; default: the e4m3 default and its tree
# variant, the bf16 default and its tree variant): speed of light, pipe utilization, warp stalls, issue
# slots. Also writes the kernels' SASS (xz). Needs GPU performance counters (ncu reports ERR_NVGPUCTRPERM
# where they are closed).
set -u
OUT=${OUT:-/tmp/h3-device-out}
mkdir -p "$OUT"
H3=./build-gpu/src/cli/h3-engine
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
export PATH=/usr/local/cuda/bin:$PATH
for f in attention_fp8 attention_hopper; do
  cuobjdump -sass "build-gpu/src/ops/CMakeFiles/h3_ops.dir/cuda/$f.cu.o" 2> /dev/null | xz -1 > "$OUT/sass_$f.xz"
done
if [ -z "$NCU" ]; then echo "profile: no ncu on this machine"; exit 0; fi
# attention_fp8_sm90<BN, causal, lazy, q in registers>, attention_bf16_sm90<D, BN, stages, causal, pingpong, lazy, batched, Q register steps>:
# the e4m3 default, the bf16 default (lazy rescale, Q in registers), lazy with Q in shared memory, eager
KERNELS=${H3_PROFILE_KERNELS:-"attention_fp8_sm90ILi128ELb0ELb1ELb1EE attention_bf16_sm90ILi128ELi128ELi2ELb0ELb1ELb1ELb0ELi8EE attention_bf16_sm90ILi128ELi128ELi2ELb0ELb1ELb1ELb0ELi0EE attention_bf16_sm90ILi128ELi128ELi2ELb0ELb1ELb0ELb0ELi0EE"}
for k in $KERNELS; do
  echo "== ncu: $k"
  timeout 120 "$NCU" --kernel-name-base mangled --kernel-name "regex:$k" --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats --section InstructionStats \
    --metrics sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,regex:smsp__average_warps_issue_stalled_.*_per_issue_active \
    "$H3" bench attention --seq 38247 --fp8 --iters 1 --rounds 1 --check-rows 1 > "$OUT/ncu_$k.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "ERR_|Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc Active|xu|fma_cycles|alu_cycles|gmma|No Eligible|Stall|Warp Cycles Per Issued|One or More Eligible|issue_stalled" \
    "$OUT/ncu_$k.txt" | grep -v " 0$" | head -60
done
