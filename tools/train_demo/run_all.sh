#!/usr/bin/env bash
# Trains the demo model end to end and checks it through the engine (tools/train_demo/README.md):
#   video VAE -> audio VAE -> conditioning (the engine's encode) -> latents -> DiT -> export -> verify
#
#   tools/train_demo/run_all.sh --smoke [--work DIR]                      # a few steps each, CPU, minutes
#   tools/train_demo/run_all.sh --device cuda [--work DIR]                # full: one 10-minute H200 call
#
# Options: --work DIR (default build/train_demo or build/train_demo_smoke), --engine PATH (default
# build/src/cli/h3-engine), --device cpu|cuda, --threads N (torch CPU threads), --seed N, --no-time-cap (full
# mode: run the step counts whatever they take), --caps V,A,D (full mode: the video VAE's, audio VAE's and DiT's
# wall-second caps instead of 150,60,230), --skip-verify (stop after the export; a later run with the same
# --work skips the stages that are done and runs only the verify stage), --init-from DIR (the video VAE and the
# DiT start from an earlier run's final weights). PYTHON (default /usr/bin/python3) runs the stages.
# A stage whose output exists is skipped (delete the work dir to start over); each stage prints its wall
# seconds and its final loss, and the last line sums them.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-/usr/bin/python3}"
SMOKE=0 DEVICE=cpu THREADS=1 SEED=0 CAP=1 CAPS=150,60,230 VERIFY_STAGE=1 INIT_FROM="" WORK="" ENGINE="$ROOT/build/src/cli/h3-engine"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --work) WORK="$2"; shift ;;
    --engine) ENGINE="$2"; shift ;;
    --device) DEVICE="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    --seed) SEED="$2"; shift ;;
    --no-time-cap) CAP=0 ;;
    --caps) CAPS="$2"; shift ;;
    --skip-verify) VERIFY_STAGE=0 ;;
    --init-from) INIT_FROM="$2"; shift ;;
    *) echo "run_all.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
need_engine() { # the conditioning and verify stages run the engine; the others do not (a GPU machine without
  # a build can train from a work dir whose conditioning was made elsewhere)
  [[ -x "$ENGINE" ]] || { echo "run_all.sh: no h3-engine at $ENGINE (build it: ninja -C build h3-engine, or pass --engine)" >&2; exit 2; }
}
[[ "$CAPS" =~ ^[0-9]+,[0-9]+,[0-9]+$ ]] || { echo "run_all.sh: --caps wants three whole seconds, V,A,D (got $CAPS)" >&2; exit 2; }
if [[ $SMOKE == 1 ]]; then
  WORK="${WORK:-$ROOT/build/train_demo_smoke}"
  VIDEO=(--steps 3 --stats-clips 2 --bank-seeds 1 --log-every 1)
  AUDIO=(--steps 3 --stats-clips 2 --log-every 1)
  COND=(--scenes 4 --fl2va-seeds 1)
  LAT=(--scenes 4 --seeds 2 --fl2va-seeds 1)
  DIT=(--steps 4 --batch 2 --eval-batches 1 --log-every 1)
  VERIFY=(--steps 4)
else
  WORK="${WORK:-$ROOT/build/train_demo}"
  # step counts, and (unless --no-time-cap) the wall seconds that end a stage sooner: 150 + 60 + 230 s of
  # training plus ~80 s of latents, statistics and start-ups stay inside one 10-minute call on an H200 (with
  # the conditioning made beforehand: it needs the engine)
  VIDEO=(--steps 6000 --batch 8 --stats-clips 32 --log-every 100)
  AUDIO=(--steps 4000 --batch 16 --stats-clips 32 --log-every 100)
  COND=(--scenes 96 --fl2va-seeds 2)
  LAT=(--scenes 96 --seeds 4 --fl2va-seeds 2)
  DIT=(--steps 8000 --batch 32 --lr 7e-4 --log-every 100)
  VERIFY=(--steps 30)
  if [[ $CAP == 1 ]]; then
    IFS=, read -r CAP_V CAP_A CAP_D <<< "$CAPS"
    VIDEO+=(--max-seconds "$CAP_V"); AUDIO+=(--max-seconds "$CAP_A"); DIT+=(--max-seconds "$CAP_D")
  fi
fi
mkdir -p "$WORK"
# before any stage runs: the engine is needed unless the conditioning is there and the verify is skipped
{ [[ -e "$WORK/conditioning.safetensors" ]] && [[ $VERIFY_STAGE == 0 ]]; } || need_engine
COMMON=(--work "$WORK" --device "$DEVICE" --threads "$THREADS" --seed "$SEED")
# the training stages on CUDA use TF32 and cuDNN's autotune; the latents and the checks stay exact fp32
TRAIN_FAST=(); [[ "$DEVICE" == cuda* ]] && TRAIN_FAST=(--fast)
# --init-from DIR: the video VAE and the DiT start from DIR's final weights (an earlier run's work dir, or a
# folder holding its video_vae.done.safetensors and dit.done.safetensors); the audio VAE starts afresh
if [[ -n "$INIT_FROM" ]]; then
  for f in video_vae dit; do
    [[ -f "$INIT_FROM/$f.done.safetensors" ]] || { echo "run_all.sh: --init-from $INIT_FROM has no $f.done.safetensors" >&2; exit 2; }
  done
  VIDEO+=(--init "$INIT_FROM/video_vae.done.safetensors"); DIT+=(--init "$INIT_FROM/dit.done.safetensors")
fi
TOTAL=0
stage() { # name, output that marks it done, command...
  local name="$1" done="$2"; shift 2
  if [[ -e "$done" ]]; then echo "== $name: done before ($done)"; return; fi
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" 2>&1 | tee "$WORK/$name.out"
  local dt=$((SECONDS - t0))
  TOTAL=$((TOTAL + dt))
  local loss
  loss="$(grep -o '"final_loss": [0-9.e-]*' "$WORK/$name.out" | tail -1 | cut -d' ' -f2 || true)"
  echo "== $name: ${dt} s wall${loss:+, final loss $loss}"
}
cd "$ROOT"
stage video_vae "$WORK/video_vae.summary.json" "$PY" "$HERE/train_vae.py" video "${COMMON[@]}" "${TRAIN_FAST[@]}" "${VIDEO[@]}"
stage audio_vae "$WORK/audio_vae.summary.json" "$PY" "$HERE/train_vae.py" audio "${COMMON[@]}" "${TRAIN_FAST[@]}" "${AUDIO[@]}"
stage conditioning "$WORK/conditioning.safetensors" "$PY" "$HERE/conditioning.py" --engine "$ENGINE" --work "$WORK" "${COND[@]}"
stage latents "$WORK/latents.safetensors" "$PY" "$HERE/latents.py" --work "$WORK" --device "$DEVICE" --threads "$THREADS" "${LAT[@]}"
stage dit "$WORK/dit.summary.json" "$PY" "$HERE/train_dit.py" "${COMMON[@]}" "${TRAIN_FAST[@]}" "${DIT[@]}"
stage export "$WORK/model/train_demo.json" "$PY" "$HERE/export.py" --work "$WORK" --out "$WORK/model"
echo "== training + export: ${TOTAL} s wall in this run"
if [[ $VERIFY_STAGE == 1 ]]; then
  stage verify "$WORK/verify/ref2va.mp4" "$PY" "$HERE/verify_engine.py" --engine "$ENGINE" --model "$WORK/model" \
    --out "$WORK/verify" --device "$DEVICE" "${VERIFY[@]}"
fi
echo "== final losses:"
for s in video_vae audio_vae dit; do
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"   {d['stage']}: {d['steps']} steps, {d['wall_seconds']} s, final loss {d['final_loss']}\" + (f\", eval {d['eval_loss']}\" if 'eval_loss' in d else ''))" "$WORK/$s.summary.json"
done
echo "== the checkpoint: $WORK/model ($(du -sh "$WORK/model" | cut -f1)); MP4s: $WORK/verify/{t2va,fl2va,ref2va}.mp4"
