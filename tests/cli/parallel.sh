#!/usr/bin/env bash
# h3-engine generate on a device group of CPU ranks (--sp / --ring / --tp, issue #17) on a tiny checkpoint with 8 DiT
# heads: the latents equal the single-rank run's within 1e-5 relative (fp32) for t2va (prompt through the
# tiny text encoder) and fl2va (keyframes), with and without DBCache; the metrics list the ranks and the
# cache decisions agree; degrees the heads do not allow and --gpus on the CPU are usage errors naming the
# flag; two processes by the launcher convention (RANK / WORLD_SIZE / MASTER_PORT) equal one (--sp 2 and
# --ring 2), rank 0 alone conditioning and both splitting the video decode.
source "$(dirname "$0")/lib/common.sh" "$@"

make_tiny "$WORK/tiny" --seed 3 --dit-heads 8
"$H3" make-tiny --help > "$WORK/help.txt" || fail "make-tiny --help failed" # a file: see lora.sh
grep -q -- "--dit-heads" "$WORK/help.txt" || fail "make-tiny has no --dit-heads"
IMG="$(dirname "$0")/../data/images"
GEN=("$H3" generate --model "$WORK/tiny" --prompt "a red fox" --size 64x32 --frames 107 --steps 4 --seed 4
     --dtype fp32 --device cpu --progress none)
# (task, cache, sp, tp, ring): every degree on t2va; DBCache and fl2va on some degrees (test_parallel covers
# every task × cache × degree through the library)
DB=dbcache:Fn=1,rdt=0.5,warmup=1
for run in "t2va none 2 1 1" "t2va none 4 1 1" "t2va none 1 2 1" "t2va none 2 2 1" "t2va $DB 2 1 1" \
           "fl2va none 2 2 1" "t2va none 2 1 2" "t2va none 1 1 2" "t2va $DB 2 1 2" "fl2va none 1 1 2"; do
  read -r task cache sp tp ring <<< "$run"
  KF=()
  [ "$task" = fl2va ] && KF=(--first-frame "$IMG/png_rgb.png" --last-frame "$IMG/jpeg_exif6.jpg")
  tag="${task}_${cache%%:*}"
  [ -f "$WORK/$tag.st" ] || expect_rc 0 "${GEN[@]}" "${KF[@]}" --cache "$cache" --save-latents "$WORK/$tag.st"
  expect_rc 0 "${GEN[@]}" "${KF[@]}" --cache "$cache" --sp "$sp" --tp "$tp" --ring "$ring" \
    --save-latents "$WORK/${tag}_g.st" --metrics "$WORK/m.json"
  latents_close "$WORK/$tag.st" "$WORK/${tag}_g.st" || fail "$run: latents differ: $(head -c 600 "$WORK/cmp.json")"
  python3 - "$WORK/m.json" "$((sp * tp * ring))" <<'PY' || fail "metrics of $run: $(head -c 400 "$WORK/m.json")"
import json, sys
m = json.load(open(sys.argv[1]))
w = m.get("work", m)
assert w["ranks"] == int(sys.argv[2]), w.get("ranks")
assert len(w["rank_useful_flops"]) == w["ranks"]
assert "dit group sp" in m["placement"], m["placement"]
PY
done
# the check can fail: t2va and fl2va latents differ
if latents_close "$WORK/t2va_none.st" "$WORK/fl2va_none.st"; then fail "compare did not tell t2va from fl2va"; fi

# Two processes on 127.0.0.1 by the launcher convention (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): the
# TCP communicator between them; rank 0 writes the latents, equal to the single-process run's.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Rank 0 alone runs the conditioner (rank 1 never loads the text encoder: it receives the rows); both decode
# a share of the video tiles, rank 0 blends them: its PNG frames equal the in-process --sp 2 run's byte for
# byte (the TCP sums are the in-process backend's bits, so the latents are the same too).
expect_rc 0 "${GEN[@]}" --sp 2 --save-latents "$WORK/sp2.st" --output "$WORK/sp2_png"
for r in 1 0; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "$H3" --log-level info "${GEN[@]:1}" --sp 2 \
    --save-latents "$WORK/proc_r$r.st" --output "$WORK/proc_png$r" --metrics "$WORK/proc_m$r.json" \
    > "$WORK/proc_$r.out" 2> "$WORK/proc_$r.err" &
  eval "PID$r=\$!"
done
wait "$PID0"; RC0=$?; wait "$PID1"; RC1=$?
[ $RC0 -eq 0 ] && [ $RC1 -eq 0 ] || { cat "$WORK"/proc_*.err; fail "launched ranks exited $RC0 / $RC1"; }
latents_close "$WORK/t2va_none.st" "$WORK/proc_r0.st" || fail "2-process latents differ: $(head -c 600 "$WORK/cmp.json")"
[ -f "$WORK/proc_r1.st" ] && fail "rank 1 wrote outputs (rank 0 writes)"
[ -e "$WORK/proc_png1" ] && fail "rank 1 wrote frames (rank 0 writes)"
diff -r "$WORK/sp2_png" "$WORK/proc_png0" > /dev/null || fail "2-process frames differ from the in-process --sp 2 frames"
cat "$WORK/proc_0.out" "$WORK/proc_0.err" | grep -q "loaded text_encoder" || fail "rank 0 did not load the text encoder"
cat "$WORK/proc_1.out" "$WORK/proc_1.err" | grep -q "loaded text_encoder" && fail "rank 1 loaded the text encoder (rank 0 conditions)"
cat "$WORK/proc_1.out" "$WORK/proc_1.err" | grep -q "loaded vae_decoder" || fail "rank 1 did not decode its tiles"
python3 - "$WORK/proc_m0.json" "$WORK/proc_m1.json" <<'PY' || fail "encode_ranks: $(cat "$WORK"/proc_m*.json | head -c 300)"
import json, sys
assert json.load(open(sys.argv[1]))["encode_ranks"] == [0]
assert json.load(open(sys.argv[2]))["encode_ranks"] == []
PY
# --ring 2 as two processes: the ring's K/V all_gather over TCP
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rm -f "$WORK"/proc_r*.st
for r in 1 0; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "${GEN[@]}" --ring 2 \
    --save-latents "$WORK/proc_r$r.st" > "$WORK/proc_$r.out" 2> "$WORK/proc_$r.err" &
  eval "PID$r=\$!"
done
wait "$PID0"; RC0=$?; wait "$PID1"; RC1=$?
[ $RC0 -eq 0 ] && [ $RC1 -eq 0 ] || { cat "$WORK"/proc_*.err; fail "--ring 2: launched ranks exited $RC0 / $RC1"; }
latents_close "$WORK/t2va_none.st" "$WORK/proc_r0.st" ||
  fail "--ring 2: 2-process latents differ: $(head -c 600 "$WORK/cmp.json")"
[ -f "$WORK/proc_r1.st" ] && fail "--ring 2: rank 1 wrote outputs (rank 0 writes)"
# Under torchrun its agent's store listens on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True); a listener
# held there stands in for it: the ranks meet on the port after it and still equal one process.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(300)' "$PORT" &
HOLDER=$!
rm -f "$WORK"/proc_r*.st
for r in 1 0; do
  TORCHELASTIC_USE_AGENT_STORE=True RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "${GEN[@]}" \
    --sp 2 --save-latents "$WORK/proc_r$r.st" > "$WORK/proc_$r.out" 2> "$WORK/proc_$r.err" &
  eval "PID$r=\$!"
done
wait "$PID0"; RC0=$?; wait "$PID1"; RC1=$?
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
[ $RC0 -eq 0 ] && [ $RC1 -eq 0 ] || { cat "$WORK"/proc_*.err; fail "under torchrun's store: ranks exited $RC0 / $RC1"; }
latents_close "$WORK/t2va_none.st" "$WORK/proc_r0.st" ||
  fail "under torchrun's store: latents differ: $(head -c 600 "$WORK/cmp.json")"

# Two "hosts" of two processes each by the launcher convention (RANK 0-3, LOCAL_RANK 0/1 on each host, one
# MASTER_ADDR:MASTER_PORT): the TCP world split into the groups — Ulysses inside a host with the ring across
# the hosts, and --sp 2 x --tp 2 — gives rank 0 the single-process latents; only rank 0 writes.
for degrees in "--sp 2 --ring 2" "--sp 2 --tp 2"; do
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -f "$WORK"/host_r*.st
  PIDS=()
  for r in 3 2 1 0; do
    # shellcheck disable=SC2086
    RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "${GEN[@]}" $degrees \
      --save-latents "$WORK/host_r$r.st" > "$WORK/host_$r.out" 2> "$WORK/host_$r.err" &
    PIDS+=($!)
  done
  RCS=""
  for p in "${PIDS[@]}"; do wait "$p"; RCS="$RCS $?"; done
  [ "$RCS" = " 0 0 0 0" ] || { cat "$WORK"/host_*.err; fail "$degrees on two hosts: ranks exited$RCS"; }
  latents_close "$WORK/t2va_none.st" "$WORK/host_r0.st" ||
    fail "$degrees on two hosts: latents differ: $(head -c 600 "$WORK/cmp.json")"
  for r in 1 2 3; do [ -f "$WORK/host_r$r.st" ] && fail "$degrees: rank $r wrote outputs (rank 0 writes)"; done
done

# --tp 2 in the other weight formats and with a run-time adapter (issue #46), each against its own one-rank
# run: int8 weights, layerwise residency (native and int8), fp16 (fp32 residual), fp8 and run-time LoRA.
latents_within() { # A B BOUND: the *latents tensors within BOUND relative RMS
  "$H3" compare --json "$1" "$2" > "$WORK/cmp.json" || return 1
  python3 - "$WORK/cmp.json" "$3" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [t["name"] for t in r["latents"]["tensors"] if t["name"].endswith("latents")
       and not t["rel_rms"] <= float(sys.argv[2])]
sys.exit(1 if bad else 0)
PY
}
make_tiny "$WORK/tiny_lora" --seed 3 --dit-heads 8 --lora "$WORK/lora.safetensors"
FMT=("$H3" generate --model "$WORK/tiny_lora" --prompt "a red fox" --size 64x32 --frames 107 --steps 3 --seed 4
     --device cpu --progress none)
for run in "int8|--dtype fp32 --weight-dtype int8|1e-5" \
           "layerwise|--dtype fp32 --residency layerwise --resident-blocks 1|1e-5" \
           "layerwise_int8|--dtype fp32 --residency layerwise --weight-dtype int8|1e-5" \
           "fp16|--dtype fp16|2e-3" "fp8|--dtype bf16 --precision fp8|3e-2" \
           "lora|--dtype fp32 --lora $WORK/lora.safetensors --lora-mode runtime|1e-5"; do
  IFS='|' read -r tag flags bound <<< "$run"
  # shellcheck disable=SC2086
  expect_rc 0 "${FMT[@]}" $flags --save-latents "$WORK/fmt_$tag.st"
  # shellcheck disable=SC2086
  expect_rc 0 "${FMT[@]}" $flags --tp 2 --save-latents "$WORK/fmt_${tag}_tp2.st" --metrics "$WORK/m.json"
  latents_within "$WORK/fmt_$tag.st" "$WORK/fmt_${tag}_tp2.st" "$bound" ||
    fail "--tp 2 with $tag: latents differ from one rank's: $(head -c 600 "$WORK/cmp.json")"
  grep -q '"ranks": *2' "$WORK/m.json" || fail "--tp 2 with $tag: the metrics do not list 2 ranks"
done
# the formats are in use: int8 and the adapter move the latents away from the plain fp32 run
expect_rc 0 "${FMT[@]}" --dtype fp32 --save-latents "$WORK/fmt_plain.st"
for tag in int8 lora; do
  latents_close "$WORK/fmt_plain.st" "$WORK/fmt_$tag.st" && fail "$tag equals the plain run: not in use?"
done
# sequence-parallel ranks as threads of one process share the model's weight source: refused, saying what
# to use instead
expect_rc 2 "${FMT[@]}" --dtype fp32 --weight-dtype int8 --sp 2 --save-latents "$WORK/x.st"
expect_err "the ranks of one process share one DiT"

RANK=0 WORLD_SIZE=2 MASTER_PORT=$PORT expect_rc 2 "${GEN[@]}" --sp 4 --save-latents "$WORK/x.st"
expect_err "WORLD_SIZE 2 but sp 4, ring 1, tp 1 needs 4 ranks"
RANK=1 expect_rc 2 "${GEN[@]}" --sp 2 --save-latents "$WORK/x.st"
expect_err "RANK and WORLD_SIZE must be set together"

expect_rc 2 "${GEN[@]}" --sp 3 --save-latents "$WORK/x.st"
expect_err "allowed sp·tp: 1, 2, 4, 8"
expect_rc 2 "${GEN[@]}" --ring 0 --save-latents "$WORK/x.st"
expect_err "ring"
expect_rc 2 "${GEN[@]}" --sp 2 --gpus 0,1 --save-latents "$WORK/x.st"
expect_err "--gpus names CUDA devices but the device is cpu"
echo "parallel: ok"
