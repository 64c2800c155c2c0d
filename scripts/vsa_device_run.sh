#!/usr/bin/env bash
# VSA on the GPU machine with binaries built elsewhere (BIN=dir holding h3-engine, h3-bench (which `h3-engine
# bench` runs) and test_ops_vsa, built for sm_90a without FFmpeg/image codecs so that they need no library the
# GPU image lacks): the CUDA-vs-CPU op tests, the DiT block bench at 1344×768×124 dense / VSA 0.9 / VSA 0.0, the
# block-sparse kernel at kept fractions 0.1/0.25/0.5/1.0, and the tiny FastH3 student on CUDA vs CPU. Logs under
# $OUT. scripts/device_check.sh runs the same checks from a fresh build.
set -u
OUT=${OUT:-/tmp/h3-vsa-out}
BIN=${BIN:-bin}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
if [ -d "${DEBS:-.debs}" ]; then
  mkdir -p /tmp/deps
  for f in "${DEBS:-.debs}"/*.deb; do dpkg -x "$f" /tmp/deps; done
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
CUDNN=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(os.path.dirname(nvidia.cudnn.__file__), 'lib'))" 2>/dev/null)
[ -n "$CUDNN" ] && export LD_LIBRARY_PATH="$CUDNN:$LD_LIBRARY_PATH"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:$LD_LIBRARY_PATH"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader 2>&1 | tee "$OUT/gpu.txt"
H3=$BIN/h3-engine
for b in "$H3" "$BIN/h3-bench" "$BIN/test_ops_vsa"; do
  missing=$(ldd "$b" 2>&1 | grep "not found")
  [ -n "$missing" ] && { echo "$b: $missing"; }
done
run() { # name, seconds, log, command... (stdout to $OUT/log, stderr to $OUT/log.err)
  local name=$1 secs=$2 log=$3; shift 3
  local t0=$(date +%s%N)
  timeout "$secs" "$@" > "$OUT/$log" 2> "$OUT/$log.err"; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  [ $rc -ne 0 ] && tail -5 "$OUT/$log.err"
}
run "test_ops_vsa --backend cuda" 60 ops_vsa.log "$BIN/test_ops_vsa" --backend cuda
grep -E '^\[  (PASSED|FAILED|SKIPPED) |Failure|got .* want|outside atol|trace' "$OUT/ops_vsa.log" | head -30
B=("$H3" bench dit --random-weights --blocks 2 --iters 3 --json)
run "bench dit dense" 60 bench_dense.json "${B[@]}" --attention dense
run "bench dit vsa 0.9" 60 bench_vsa09.json "${B[@]}" --attention vsa:sparsity=0.9 --vsa-scan 0.1,0.25,0.5,1
run "bench dit vsa 0.0" 60 bench_vsa00.json "${B[@]}" --attention vsa:sparsity=0 --vsa-scan 1
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n)))
    except Exception as e:
        print(n, "unreadable:", e, open(os.path.join(out, n)).read()[-600:]); return None
d, v9, v0 = load("bench_dense.json"), load("bench_vsa09.json"), load("bench_vsa00.json")
if d:
    print(f"dense: {d['seconds_per_block']:.4f} s/block ({d['seconds_per_forward_50_blocks']:.2f} s/50 blocks), "
          f"attention {d['attention_seconds']:.4f} s ({d['attention_tflops']:.0f} TFLOP/s), peak {d['peak_device_gib']:.1f} GiB")
for name, j in (("vsa 0.9", v9), ("vsa 0.0", v0)):
    if not j: continue
    r = j["seconds_per_block"] / d["seconds_per_block"] if d else 0
    print(f"{name}: {j['seconds_per_block']:.4f} s/block ({j['seconds_per_forward_50_blocks']:.2f} s/50 blocks), x{r:.3f} of dense")
    for run in j["vsa"]["runs"]:
        print(f"  kept {run['kept_fraction']:.2f} keep {run['keep']} visited {run['visited_tile_fraction']:.3f}: "
              f"sparse {run['sparse_attention_seconds']:.4f} s = x{run['vs_all_tiles']:.3f} of all tiles, "
              f"x{run['vs_dense']:.3f} of dense; selection {run['select_seconds']:.4f} s")
PY
# the tiny FastH3 student (head dim 32: the scalar kernel) on CUDA vs CPU, fp32 and bf16
"$H3" make-tiny /tmp/fast --variant fasth3 > /dev/null
for dev in cpu cuda; do
  for dt in fp32 bf16; do
    timeout 60 "$H3" generate --model /tmp/fast --random-prompt-embeds 7 --size 64x32 --frames 107 --seed 4 \
      --device $dev --dtype $dt --save-latents /tmp/fast_${dev}_$dt.st --progress none 2> "$OUT/fast_${dev}_$dt.err" ||
      { echo "tiny fasth3 $dev $dt failed"; tail -3 "$OUT/fast_${dev}_$dt.err"; }
  done
done
python3 - <<'PY'
import json, struct
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]; out[k] = struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
for dt in ("fp32", "bf16"):
    try:
        a, b = load(f"/tmp/fast_cuda_{dt}.st"), load(f"/tmp/fast_cpu_{dt}.st")
    except Exception as e:
        print("tiny fasth3", dt, "missing:", e); continue
    for k in ("video_latents", "audio_latents"):
        num = max(abs(x - y) for x, y in zip(a[k], b[k])); den = max(abs(y) for y in b[k])
        print(f"tiny fasth3 {dt} cuda vs cpu {k}: max rel err {num / den:.2e}")
PY
(cd "$OUT" && tar czf logs.tgz *.log *.json *.err gpu.txt 2>/dev/null && rm -f *.log *.json *.err)
