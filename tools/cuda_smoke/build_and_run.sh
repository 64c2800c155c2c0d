#!/usr/bin/env bash
# Builds tools/cuda_smoke/smoke from the ops/cuda sources with nvcc (sm_90a only) and runs it.
# Usage (repo root): tools/cuda_smoke/build_and_run.sh [out_dir]
set -u
OUT_DIR=${1:-/tmp/cuda_smoke}
mkdir -p "$OUT_DIR/obj"
NVCC=${NVCC:-nvcc}
CUDNN_INC=$(dirname "$(find / -name cudnn.h -path '*include*' 2>/dev/null | head -1)")
CUDNN_LIB=$(dirname "$(find / -name 'libcudnn.so*' 2>/dev/null | head -1)")
FLAGS="-std=c++20 -O2 -lineinfo --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -Isrc -I$CUDNN_INC -DH3_WITH_CUDA=1"
SRCS="src/core/status.cpp src/core/dtype.cpp src/core/device.cpp src/core/storage.cpp src/core/tensor.cpp
      src/core/cuda_api.cpp src/ops/context.cpp src/ops/cuda/cuda_context.cpp src/ops/cuda/attention_cudnn.cpp
      src/ops/cuda/gemm.cu src/ops/cuda/elementwise.cu src/ops/cuda/norm.cu src/ops/cuda/adaln.cu
      src/ops/cuda/attention.cu tools/cuda_smoke/smoke.cpp"
pids=()
objs=()
for s in $SRCS; do
    o="$OUT_DIR/obj/$(echo "$s" | tr '/' '_').o"
    objs+=("$o")
    case "$s" in
        *.cu) $NVCC $FLAGS -c "$s" -o "$o" > "$o.log" 2>&1 & ;;
        *) $NVCC $FLAGS -x c++ -c "$s" -o "$o" > "$o.log" 2>&1 & ;;
    esac
    pids+=($!)
done
fail=0
for i in "${!pids[@]}"; do wait "${pids[$i]}" || { echo "compile failed: ${objs[$i]}"; cat "${objs[$i]}.log"; fail=1; }; done
[ $fail = 0 ] || exit 3
$NVCC -gencode=arch=compute_90a,code=sm_90a "${objs[@]}" -o "$OUT_DIR/smoke" -L"$CUDNN_LIB" -lcublasLt -lcublas -lcudnn -lpthread || exit 4
echo "cudnn include $CUDNN_INC lib $CUDNN_LIB"
LD_LIBRARY_PATH="$CUDNN_LIB:${LD_LIBRARY_PATH:-}" "$OUT_DIR/smoke" "${@:2}"
