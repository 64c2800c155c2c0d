#!/usr/bin/env bash
# generate --launch processes (what --gpus with several GPUs does): the ranks as child processes of one
# command, each one rank by the launcher convention over TCP on 127.0.0.1 — the latents equal the
# single-process run's; a rank that fails (here rank 0 cannot listen: its MASTER_PORT is taken) fails the
# command within the grace period instead of leaving rank 1 waiting for its peer; usage errors stay usage
# errors (checked before anything is spawned).
source "$(dirname "$0")/lib/common.sh" "$@"
"$H3" make-tiny "$WORK/tiny" --seed 3 --dit-heads 8 > /dev/null || fail "make-tiny"
GEN=("$H3" generate --model "$WORK/tiny" --prompt "a red fox" --size 64x32 --frames 107 --steps 4 --seed 4
     --dtype fp32 --device cpu --progress none)
"${GEN[@]}" --save-latents "$WORK/one.st" 2> "$WORK/one.err" || { cat "$WORK/one.err"; fail "single rank"; }
"${GEN[@]}" --sp 2 --launch processes --save-latents "$WORK/two.st" --metrics "$WORK/m.json" \
  > "$WORK/two.out" 2> "$WORK/two.err" || { cat "$WORK/two.err"; fail "--launch processes exited $?"; }
grep -q "2 ranks as processes on 127.0.0.1:" "$WORK/two.err" || { cat "$WORK/two.err"; fail "no launch line"; }
"$H3" compare --json "$WORK/one.st" "$WORK/two.st" > "$WORK/cmp.json" || fail "compare"
python3 - "$WORK/cmp.json" "$WORK/m.json" <<'PY' || fail "latents or metrics: $(head -c 600 "$WORK/cmp.json")"
import json, sys
r = json.load(open(sys.argv[1]))
bad = [t["name"] for t in r["latents"]["tensors"] if t["name"].endswith("latents") and not t["rel_rms"] <= 1e-5]
assert not bad, bad
m = json.load(open(sys.argv[2]))
assert "dit group sp 2" in m["placement"], m["placement"]
PY
# rank 0's port is taken: rank 0 fails at once, the launcher stops rank 1 (it would wait for rank 0)
python3 -c 'import socket, time, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(120)' > "$WORK/port.txt" &
HOLDER=$!
for _ in $(seq 50); do [ -s "$WORK/port.txt" ] && break; sleep 0.1; done
PORT=$(cat "$WORK/port.txt")
start=$(date +%s)
MASTER_PORT=$PORT "${GEN[@]}" --sp 2 --launch processes --save-latents "$WORK/x.st" > /dev/null 2> "$WORK/fail.err"
rc=$?; took=$(( $(date +%s) - start ))
kill $HOLDER 2> /dev/null
[ $rc -ne 0 ] || fail "a failed rank 0 left the command successful"
grep -q "rank 0 of 2" "$WORK/fail.err" || { cat "$WORK/fail.err"; fail "the error does not name rank 0"; }
[ "$took" -lt 40 ] || fail "the failed launch took ${took} s"
[ -f "$WORK/x.st" ] && fail "a failed launch wrote latents"
# usage errors are reported by the parent before it spawns
"${GEN[@]}" --sp 3 --launch processes --save-latents "$WORK/y.st" > /dev/null 2> "$WORK/u.err"
[ $? -eq 2 ] || { cat "$WORK/u.err"; fail "--sp 3 rc"; }
grep -q "ranks as processes" "$WORK/u.err" && fail "spawned before the usage check"
grep -q "allowed sp·tp" "$WORK/u.err" || { cat "$WORK/u.err"; fail "--sp 3 message"; }
"${GEN[@]}" --sp 2 --launch sideways --save-latents "$WORK/y.st" > /dev/null 2>&1; [ $? -eq 2 ] || fail "bad --launch"
echo "spawn_ranks: all checks passed"
