#!/usr/bin/env bash
# Builds tools/cuda_smoke/smoke from the ops/cuda sources with nvcc (sm_90a only) and runs it.
# Usage (repo root): tools/cuda_smoke/build_and_run.sh [out_dir]
set -u
OUT_DIR=${1:-/tmp/cuda_smoke}
mkdir -p "$OUT_DIR/obj"
NVCC=${NVCC:-nvcc}
# Prefer the system/toolkit cuDNN; fall back to a Python wheel's copy (header and library from one place).
CUDNN_INC=$(dirname "$(ls /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h /usr/local/cuda/include/cudnn.h \
    2>/dev/null | head -1)" 2>/dev/null)
CUDNN_LIB=$(dirname "$(ls /usr/lib/x86_64-linux-gnu/libcudnn.so* /usr/local/cuda/lib64/libcudnn.so* 2>/dev/null | head -1)" \
    2>/dev/null)
if [ -z "$CUDNN_INC" ] || [ "$CUDNN_INC" = . ] || [ -z "$CUDNN_LIB" ] || [ "$CUDNN_LIB" = . ]; then
    WHEEL=$(dirname "$(find / -path '*nvidia/cudnn/include/cudnn.h' 2>/dev/null | head -1)")/..
    CUDNN_INC=$WHEEL/include
    CUDNN_LIB=$WHEEL/lib
fi
echo "cuDNN: include $CUDNN_INC, lib $CUDNN_LIB: $(ls $CUDNN_LIB | grep -m3 libcudnn)"

# -include cstdint: core/device.h uses uint8_t without <cstdint> (g++ 13 there does not pull it in).
FLAGS="-include cstdint -std=c++20 -O2 -lineinfo --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -Isrc -I$CUDNN_INC -DH3_WITH_CUDA=1"
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
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total --format=csv,noheader || true
LD_LIBRARY_PATH="$CUDNN_LIB:${LD_LIBRARY_PATH:-}" "$OUT_DIR/smoke" "${@:2}"
