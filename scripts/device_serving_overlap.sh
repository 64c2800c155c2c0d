# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_serving_overlap.sh
# [H3_CUSTOM_TESTS=1]) after its build: issue #46 on one GPU.
#  1. The Ulysses / ring overlap at world size 1: bench dit --sp 1 [--ring 1] with --overlap-groups 1 (every
#     collective on the compute stream) against 0 (automatic: head groups, the lane), 2 blocks at
#     1344x768x124, bf16 — the grouped path's own cost (several GPUs are needed to see the hidden time).
#  2. serve --gpus 0 on the GPU (one replica of one rank process) runs jobs, and its overhead against plain
#     serve: the tiny checkpoint, 64x32, 4 steps, MP4 through /v1/videos/sync, 6 jobs after a warm-up, the
#     two servers interleaved twice.
# H3_SO_PARTS picks parts: overlap serve (default both).
SO_PARTS=${H3_SO_PARTS:-overlap serve}
so_has() { case " $SO_PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
if so_has overlap; then
  for path in "--sp 1" "--sp 1 --ring 1"; do
    for groups in 1 0 1 0; do
      echo "== bench dit $path --overlap-groups $groups (2 blocks, bf16) ($SECONDS s)"
      # shellcheck disable=SC2086
      timeout 120 $H3 bench dit --random-weights --blocks 2 --iters 2 --frames 124 $path \
        --overlap-groups $groups --json > "$OUT/so_dit.json" 2> "$OUT/so_dit.err"; echo "rc=$?"
      python3 -c "
import json; j=json.load(open('$OUT/so_dit.json'))
print({k: j.get(k) for k in ['forward_path','overlap_groups','seconds_per_block','seconds_per_forward_50_blocks']})" \
        2>&1 | tail -1
      tail -2 "$OUT/so_dit.err"
    done
  done
fi
if so_has serve; then
  echo "== serve --gpus 0 on cuda vs plain serve (tiny, 64x32, 4 steps, MP4) ($SECONDS s)"
  SO_TINY=/tmp/so_tiny
  $H3 make-tiny "$SO_TINY" --seed 3 > /dev/null 2>&1
  so_serve() { # tag args... → SO_URL, SO_PID
    local tag=$1; shift
    $H3 serve --model "$SO_TINY" --device cuda --port 0 --output-dir "/tmp/so_$tag" "$@" \
      > "$OUT/so_$tag.out" 2> "$OUT/so_$tag.err" &
    SO_PID=$!
    for _ in $(seq 600); do grep -q "listening on" "$OUT/so_$tag.out" 2> /dev/null && break; sleep 0.1; done
    SO_URL=$(sed -n 's/^serve: listening on //p' "$OUT/so_$tag.out")
  }
  so_jobs() { # tag: 1 warm-up + 6 timed sync jobs, prints the median ms
    local tag=$1 times=()
    for i in 0 1 2 3 4 5 6; do
      local t0=$EPOCHREALTIME
      curl -s -m 120 "$SO_URL/v1/videos/sync" -H 'Content-Type: application/json' \
        -d '{"prompt": "a red fox", "size": "64x32", "seconds": 4, "num_inference_steps": 4, "seed": 4}' \
        -o "/tmp/so_$tag.mp4" -w "%{http_code}" > "/tmp/so_$tag.code"
      local t1=$EPOCHREALTIME
      [ "$i" -gt 0 ] && times+=("$(python3 -c "print(round(($t1 - $t0) * 1000, 1))")")
    done
    echo "$tag: http $(cat "/tmp/so_$tag.code"), $(stat -c %s "/tmp/so_$tag.mp4" 2> /dev/null) B, ms: ${times[*]}," \
      "median $(printf '%s\n' "${times[@]}" | sort -n | sed -n 4p)"
  }
  for round in 1 2; do
    for kind in plain replica; do
      args=(); [ "$kind" = replica ] && args=(--gpus 0)
      so_serve "$kind$round" "${args[@]}"
      if [ -z "$SO_URL" ]; then echo "$kind: the server did not start"; tail -5 "$OUT/so_$kind$round.err"; continue; fi
      [ "$kind" = replica ] && curl -s "$SO_URL/health" | head -c 600 && echo
      so_jobs "$kind$round"
      kill -TERM "$SO_PID"; wait "$SO_PID" 2> /dev/null; echo "$kind$round: server rc=$?"
    done
  done
fi
