#!/usr/bin/env bash
# serve --gpus LIST --sp N (issue #46): replicas of rank processes behind one HTTP front, on the CPU (the
# "GPUs" are rank slots). 2 replicas x sp 2 = 4 rank processes: concurrent jobs, one per replica, whose
# latents equal one rank's (fp32); a cancel reaches the ranks; kill -9 of a rank process mid-job fails that
# job with a record naming the rank and the signal (not re-queued), the replica restarts and runs its next
# job, the other replica's job completes, no job is lost or run twice; SIGTERM stops every rank process.
# serve --gpus 0 (one replica, one process) runs a job, and again after its process is killed mid-job and
# while idle; a list that does not split is refused naming --gpus;
# two "hosts" of two processes each under the launcher convention (--sp 2 --ring 2: rank 0 serves HTTP,
# the others run what it sends) equal one process; a dead follower fails the next job clearly.
source "$(dirname "$0")/lib/common.sh" "$@"
make_tiny "$WORK/tiny" --seed 3 --dit-heads 8
BODY='"prompt": "a red fox", "size": "64x32", "seconds": 4, "output_format": "latents"'
"$H3" generate --model "$WORK/tiny" --prompt "a red fox" --size 64x32 --seconds 4 --steps 4 --seed 4 \
  --dtype fp32 --device cpu --progress none --save-latents "$WORK/one.st" 2> "$WORK/one.err" || fail "generate"
SERVE=(serve --model "$WORK/tiny" --device cpu --dtype fp32 --port 0)
PIDS_TO_KILL=()
cleanup() { for p in "${PIDS_TO_KILL[@]}"; do kill -9 "$p" 2> /dev/null; done; }
trap cleanup EXIT

# start SERVE ARGS... with output in $WORK/$1.*; sets URL and SPID
start_server() {
  local tag=$1; shift
  "$H3" "$@" > "$WORK/$tag.out" 2> "$WORK/$tag.err" &
  SPID=$!; PIDS_TO_KILL+=("$SPID")
  for _ in $(seq 300); do grep -q "listening on" "$WORK/$tag.out" 2> /dev/null && break; sleep 0.1; done
  URL=$(sed -n 's/^serve: listening on //p' "$WORK/$tag.out")
  [ -n "$URL" ] || { cat "$WORK/$tag.err"; fail "$tag: the server did not start"; }
}
submit() { curl -s "$URL/v1/videos" -H 'Content-Type: application/json' -d "{$BODY, $1}" | jq -r .id; }
status() { curl -s "$URL/v1/videos/$1" | jq -r .status; }
wait_final() { # ID SECONDS
  for _ in $(seq $(( $2 * 10 ))); do
    case $(status "$1") in completed|failed|cancelled) return 0;; esac; sleep 0.1; done
  fail "job $1 is still $(status "$1") after $2 s"
}
health() { curl -s "$URL/health"; }
replica_of() { health | jq -r --arg id "$1" '.replicas[] | select(.job == $id) | .replica'; }
wait_progress() { # ID PERCENT
  for _ in $(seq 300); do
    p=$(curl -s "$URL/v1/videos/$1" | jq -r '.progress // 0'); [ "${p%.*}" -ge "$2" ] && return 0; sleep 0.1; done
  fail "job $1 did not reach $2 %"
}

# ---- a list that does not split into replicas: refused before anything starts, naming --gpus
expect_rc 2 "$H3" "${SERVE[@]}" --gpus 0,1,2 --sp 2 --output-dir "$WORK/bad"
expect_err "gpus: 3 devices do not split into replicas of sp·ring·tp = 2"
expect_err "\-\-gpus"

# ---- 2 replicas x sp 2: concurrent jobs, one per replica, equal to one rank
start_server r4 "${SERVE[@]}" --gpus 0,1,2,3 --sp 2 --output-dir "$WORK/out4"
[ "$(health | jq '.replicas | length')" = 2 ] || fail "2 replicas: $(health)"
[ "$(health | jq '[.replicas[].pids | length] | add')" = 4 ] || fail "4 rank processes: $(health)"
A=$(submit '"num_inference_steps": 4, "seed": 4'); B=$(submit '"num_inference_steps": 4, "seed": 4')
wait_final "$A" 120; wait_final "$B" 120
for id in "$A" "$B"; do
  [ "$(status "$id")" = completed ] || fail "job $id: $(curl -s "$URL/v1/videos/$id")"
  latents_close "$WORK/one.st" "$WORK/out4/$id/latents.safetensors" || fail "job $id's latents differ from one rank's"
  jq -e '.metrics.placement | test("dit group sp 2")' "$WORK/out4/$id/job.json" > /dev/null || fail "placement"
done
[ "$(health | jq -c '[.replicas[].jobs_done]')" = "[1,1]" ] || fail "one job per replica: $(health)"

# ---- cancel reaches the ranks: the job stops, its replica's rank 1 ends the job too, within seconds
C=$(submit '"num_inference_steps": 1000, "seed": 5')
wait_progress "$C" 6
RC=$(replica_of "$C"); [ -n "$RC" ] || fail "no replica runs $C"
before=$(grep -c "ended:" "$WORK/r4.err")
curl -s -X POST "$URL/v1/videos/$C/cancel" > /dev/null
wait_final "$C" 5
[ "$(status "$C")" = cancelled ] || fail "cancel: $(curl -s "$URL/v1/videos/$C")"
for _ in $(seq 50); do [ "$(grep -c "ended:" "$WORK/r4.err")" -gt "$before" ] && break; sleep 0.1; done
[ "$(grep -c "ended:" "$WORK/r4.err")" -gt "$before" ] || { tail "$WORK/r4.err"; fail "rank 1 did not end the cancelled job"; }

# ---- kill -9 of a rank process mid-job
L=$(submit '"num_inference_steps": 1000, "seed": 6')
wait_progress "$L" 6
S=$(submit '"num_inference_steps": 30, "seed": 7')   # the other replica takes it
RL=$(replica_of "$L"); VICTIM=$(health | jq -r --argjson r "$RL" '.replicas[$r].pids[1]')
kill -9 "$VICTIM"
wait_final "$L" 20; wait_final "$S" 120
[ "$(status "$L")" = failed ] || fail "the killed job: $(curl -s "$URL/v1/videos/$L")"
msg=$(curl -s "$URL/v1/videos/$L" | jq -r .error.message)
for want in "replica $RL" "rank 1 (pid $VICTIM) was killed by signal 9" "not re-queued"; do
  grep -qF "$want" <<< "$msg" || fail "the record lacks '$want': $msg"; done
[ "$(status "$S")" = completed ] || fail "the other replica's job: $(curl -s "$URL/v1/videos/$S")"
for _ in $(seq 300); do [ "$(health | jq -r --argjson r "$RL" '.replicas[$r].state')" = ready ] && break; sleep 0.1; done
h=$(health); [ "$(jq -r .status <<< "$h")" = ok ] || fail "/health: $h"
[ "$(jq --argjson r "$RL" '.replicas[$r].restarts' <<< "$h")" = 1 ] || fail "restarts: $h"
jq -e --argjson r "$RL" --argjson v "$VICTIM" '.replicas[$r].pids | index($v) | not' <<< "$h" > /dev/null || fail "pids: $h"
done_before=$(jq --argjson r "$RL" '.replicas[$r].jobs_done' <<< "$h")
# two jobs at once: each replica takes one, so the restarted one runs a job again
D=$(submit '"num_inference_steps": 4, "seed": 4'); E=$(submit '"num_inference_steps": 4, "seed": 4')
wait_final "$D" 120; wait_final "$E" 120
for id in "$D" "$E"; do
  [ "$(status "$id")" = completed ] || fail "after the restart, job $id: $(curl -s "$URL/v1/videos/$id")"
  latents_close "$WORK/one.st" "$WORK/out4/$id/latents.safetensors" || fail "job $id's latents (after the restart)"
done
h=$(health)
[ "$(jq --argjson r "$RL" '.replicas[$r].jobs_done' <<< "$h")" -gt "$done_before" ] || fail "the restarted replica ran no job: $h"
# every job exactly once: 7 records, each final once; the replicas' counters add up to them
curl -s "$URL/v1/videos?limit=100" > "$WORK/list.json"
[ "$(jq '.data | length' "$WORK/list.json")" = 7 ] || fail "records: $(cat "$WORK/list.json")"
[ "$(jq '[.replicas[] | .jobs_done + .failures + .cancelled] | add' <<< "$h")" = 7 ] || fail "counters: $h"
curl -s "$URL/metrics" > "$WORK/metrics.txt"   # (not piped into grep -q: pipefail and curl's SIGPIPE)
grep -q "^h3_replica_restarts_total{replica=\"$RL\"} 1" "$WORK/metrics.txt" || fail "/metrics restarts"
grep -q '^h3_requests_total{status="failed"} 1' "$WORK/metrics.txt" ||
  fail "/metrics failed: $(grep h3_requests "$WORK/metrics.txt")"
RANK_PIDS=$(jq -r '.replicas[].pids[]' <<< "$h")
kill -TERM "$SPID"; wait "$SPID"; rc=$?
[ $rc -eq 0 ] || { tail "$WORK/r4.err"; fail "SIGTERM: exit $rc"; }
for p in $RANK_PIDS; do kill -0 "$p" 2> /dev/null && fail "rank process $p outlived the server"; done

# ---- serve --gpus 0: one replica of one process
start_server r1 "${SERVE[@]}" --gpus 0 --output-dir "$WORK/out1"
G=$(submit '"num_inference_steps": 4, "seed": 4'); wait_final "$G" 120
[ "$(status "$G")" = completed ] || fail "--gpus 0: $(curl -s "$URL/v1/videos/$G")"
latents_close "$WORK/one.st" "$WORK/out1/$G/latents.safetensors" || fail "--gpus 0 latents"
# its one process (rank 0, the job channel's end) killed mid-job: the job fails naming it, the next one runs
K=$(submit '"num_inference_steps": 1000, "seed": 8'); wait_progress "$K" 6
P0=$(health | jq -r '.replicas[0].pids[0]'); kill -9 "$P0"; wait_final "$K" 20
msg=$(curl -s "$URL/v1/videos/$K" | jq -r .error.message)
grep -qF "rank 0 (pid $P0) was killed by signal 9" <<< "$msg" || fail "rank 0 killed: $msg"
G2=$(submit '"num_inference_steps": 4, "seed": 4'); wait_final "$G2" 120
[ "$(status "$G2")" = completed ] || fail "after rank 0 died: $(curl -s "$URL/v1/videos/$G2")"
# killed while idle: noticed before the next job, which runs on the restarted process
P0=$(health | jq -r '.replicas[0].pids[0]'); kill -9 "$P0"; sleep 0.3
G3=$(submit '"num_inference_steps": 4, "seed": 4'); wait_final "$G3" 120
[ "$(status "$G3")" = completed ] || fail "after an idle death: $(curl -s "$URL/v1/videos/$G3")"
[ "$(health | jq '.replicas[0].restarts')" = 2 ] || fail "--gpus 0 restarts: $(health)"
kill -TERM "$SPID"; wait "$SPID" || fail "--gpus 0: SIGTERM exit"

# ---- two "hosts" of two processes under the launcher convention: rank 0 serves, the others follow
PORT=$(python3 -c 'import socket
for _ in range(50):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]; b = socket.socket()
    try: b.bind(("127.0.0.1", p + 1))
    except OSError: continue
    print(p); break')
for r in 3 2 1; do
  RANK=$r WORLD_SIZE=4 LOCAL_RANK=$(( r % 2 )) MASTER_PORT=$PORT "$H3" "${SERVE[@]}" --sp 2 --ring 2 \
    --output-dir "$WORK/outL$r" > /dev/null 2> "$WORK/L$r.err" &
  PIDS_TO_KILL+=($!); FOLLOWERS+=" $!"
done
RANK=0 WORLD_SIZE=4 LOCAL_RANK=0 MASTER_PORT=$PORT start_server L0 "${SERVE[@]}" --sp 2 --ring 2 --output-dir "$WORK/outL"
H=$(submit '"num_inference_steps": 4, "seed": 4'); wait_final "$H" 120
[ "$(status "$H")" = completed ] || fail "launched group: $(curl -s "$URL/v1/videos/$H")"
latents_close "$WORK/one.st" "$WORK/outL/$H/latents.safetensors" || fail "launched group's latents"
grep -q "rank 3: job 1 done" "$WORK/L3.err" || { cat "$WORK/L3.err"; fail "rank 3 ran no job"; }
[ "$(health | jq -r '.replicas[0].state')" = ready ] || fail "launched group's /health: $(health)"
# a follower killed: the next job fails saying the group lost a rank (the launcher restarts groups), the
# front stays up and says so
kill -9 "${FOLLOWERS##* }"
F=$(submit '"num_inference_steps": 4, "seed": 4'); wait_final "$F" 60
msg=$(curl -s "$URL/v1/videos/$F" | jq -r .error.message)
grep -qF "a rank of this serving group is gone" <<< "$msg" || fail "launched group, dead rank: $msg"
h=$(health); [ "$(jq -r .status <<< "$h")" = ok ] && [ "$(jq -r '.replicas[0].state' <<< "$h")" = broken ] ||
  fail "launched group's /health after a dead rank: $h"
kill -TERM "$SPID"; wait "$SPID" || fail "launched rank 0: SIGTERM exit"
for p in $FOLLOWERS; do
  for _ in $(seq 100); do kill -0 "$p" 2> /dev/null || break; sleep 0.1; done
  kill -0 "$p" 2> /dev/null && fail "follower $p outlived rank 0"
done
echo "serve_replicas: all checks passed"
