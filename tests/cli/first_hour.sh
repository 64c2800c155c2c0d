#!/usr/bin/env bash
# A user's first hour (issue 44): a checkpoint's own defaults (h3_defaults.json) apply with an explicit
# --model; every output path is checked (and its folders created) before the checkpoint is opened — the
# log shows no model store and no load; prompt words outside the demo's caption vocabulary are warned about
# (the job still runs); every stage shows in --progress json and the done event names the files; the summary
# ends with the file and the wall time; one steps limit; --size suggests a valid size and is not echoed first.
source "$(dirname "$0")/lib/common.sh" "$@"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEMO="$ROOT/models/h3-demo"
make_tiny "$WORK/tiny" --seed 1
TINY=("$H3" --log-level info generate --model "$WORK/tiny" --random-prompt-embeds 5 --device cpu --dtype fp32
  --progress none)

# ---- outputs checked before compute: the errors name the flag and the path, and nothing was opened
no_load() { ! grep -q "model store" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "$1: the model was opened"; }; }
touch "$WORK/afile"
expect_rc 3 "${TINY[@]}" --size 64x32 --steps 2 --output "$WORK/afile/sub/out.mp4"
expect_err "\-\-output: '$WORK/afile/sub/out.mp4'"; expect_err "is a file, not a folder"; no_load "output under a file"
expect_rc 2 "${TINY[@]}" --size 64x32 --steps 2 --output "$WORK/out.mkv"
expect_err "unknown extension '.mkv'"; no_load ".mkv"
expect_rc 3 "${TINY[@]}" --size 64x32 --steps 2 --save-latents "$WORK/afile/x.st"
expect_err "\-\-save-latents: '$WORK/afile/x.st'"; no_load "latents under a file"
expect_rc 3 "${TINY[@]}" --size 64x32 --steps 2 --save-latents "$WORK/x.mp4"
expect_err "\-\-save-latents"; expect_err "safetensors"; no_load "latents as .mp4"
expect_rc 3 "${TINY[@]}" --size 64x32 --steps 2 --save-latents "$WORK/x.st" --metrics "$WORK/m.txt"
expect_err "\-\-metrics: '$WORK/m.txt': unknown extension"; no_load "metrics .txt"
if [ "$(id -u)" != 0 ]; then # root writes anywhere
  mkdir -p "$WORK/ro"; chmod a-w "$WORK/ro"
  expect_rc 4 "${TINY[@]}" --size 64x32 --steps 2 --output "$WORK/ro/out.wav"
  expect_err "not writable"; no_load "read-only folder"
fi
# missing parent folders are created; the closing line names the files and the wall time
expect_rc 0 "${TINY[@]}" --size 64x32 --steps 2 --output "$WORK/new/sub/out.wav" \
  --save-latents "$WORK/new2/deep/x.st" --metrics "$WORK/new3/m.json"
[ -s "$WORK/new/sub/out.wav" ] && [ -s "$WORK/new2/deep/x.st" ] && [ -s "$WORK/new3/m.json" ] ||
  fail "the outputs in new folders were not written"
tail -n 1 "$WORK/err.txt" | grep -Eq "^generate: wrote $WORK/new2/deep/x.st and $WORK/new/sub/out.wav in [0-9.]+ s$" ||
  { cat "$WORK/err.txt"; fail "the summary does not end with the files written and the wall time"; }
grep "FLOP/s" "$WORK/err.txt" | grep -q "[0-9]e[-+]" && fail "a rate in scientific notation: $(grep 'FLOP/s' "$WORK/err.txt")"
grep -Eq "[0-9] [kMGTP]?FLOP/s" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "no human FLOP/s rate"; }

# ---- progress for every stage (json) and the done event's paths
expect_rc 0 "$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --device cpu --size 64x32 --steps 2 \
  --output "$WORK/p.wav" --save-latents "$WORK/p.st" --progress json
python3 - "$WORK/out.txt" "$WORK/p.wav" "$WORK/p.st" <<'PY' || fail "progress json stages / done event"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
stages = [l["stage"] for l in lines if l["event"] == "stage"]
loads = [l["component"] for l in lines if l["event"] == "stage" and l["stage"] == "load"]
for s in ("encode", "load", "denoise", "decode", "mux"):
    assert s in stages, (s, stages)
assert "transformer" in loads and "audio_vae_decoder" in loads, loads
done = lines[-1]
assert done["event"] == "done", done
assert done["output"] == sys.argv[2] and done["latents"] == sys.argv[3], done
assert done["written"] == [sys.argv[3], sys.argv[2]] and done["wall_seconds"] > 0, done
print("stages:", stages)
PY
# the video decode reports each clip: clip 1..N of N, its percentage rising through the decode's share
expect_rc 0 "$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --device cpu --size 64x32 --steps 2 \
  --output "$WORK/p.mp4" --progress json
python3 - "$WORK/out.txt" <<'PY' || fail "progress json decode clips"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
clips = [l for l in lines if l["event"] == "decode"]
assert clips, lines
n = clips[0]["clips"]
assert [c["clip"] for c in clips] == list(range(1, n + 1)) and all(c["clips"] == n for c in clips), clips
pct = [c["percent"] for c in clips]
assert all(90 < a < b <= 97 for a, b in zip(pct, pct[1:])) and pct[-1] == 97, pct
events = [l["event"] for l in lines]
assert events.index("decode") > max(i for i, l in enumerate(lines) if l.get("stage") == "decode"), events
print("decode clips:", n)
PY

# ---- one steps limit (the builder's 1000) and --size: a suggestion, no echo before the error
expect_rc 2 "${TINY[@]}" --size 64x32 --steps 1001 --save-latents "$WORK/x.st"
expect_err "\-\-steps 1001 must lie in \[2, 1000\]"
expect_rc 2 "$H3" generate --prompt "a red ball" --size big --save-latents "$WORK/x.st" --progress none
grep -q "big" <(grep -v "size 'big'" "$WORK/err.txt") && { cat "$WORK/err.txt"; fail "--size big echoed"; }
expect_err "\-\-size 'big' must look like 1344x768"
expect_rc 2 "${TINY[@]}" --size 1344X768 --steps 2 --save-latents "$WORK/x.st"
expect_err "did you mean 1344x768?"
expect_rc 2 "${TINY[@]}" --size 100x60 --steps 2 --save-latents "$WORK/x.st"
expect_err "the nearest valid size is 96x64"

# ---- the demo model named explicitly: its h3_defaults.json (128x64, 107 frames, 30 steps); words it does
# not know are warned about, the job still runs (2 steps here; the default steps below, cut after one step)
expect_rc 0 "$H3" generate --model "$DEMO" --prompt "a cat playing piano on a dark background" --seed 1 \
  --device cpu --steps 2 --save-latents "$WORK/demo.st" --progress none
expect_err "128x64, 107 frames"
expect_err "from the checkpoint's h3_defaults.json: size 128x64, frames 107$"
expect_err "warning: prompt: the words 'cat', 'playing', 'piano' are outside the vocabulary"
expect_err "the words it knows: a, background, ball, blue"
grep -q "warning: .*'dark'" "$WORK/err.txt" && fail "'dark' is a caption word"
[ -s "$WORK/demo.st" ] || fail "the demo job with unknown words did not run"
"$H3" generate --model "$DEMO" --prompt "a red ball bounces up on a light background" --seed 1 --device cpu \
  --save-latents "$WORK/demo2.st" --progress json >"$WORK/out.txt" 2>"$WORK/err.txt" &
pid=$!
for _ in $(seq 1 600); do grep -q '"step":1,' "$WORK/out.txt" 2>/dev/null && break; sleep 0.1; done
kill -INT $pid
wait $pid
grep -q '"step":1,"total":29,' "$WORK/out.txt" || { cat "$WORK/out.txt" "$WORK/err.txt"; fail "not the demo's 30 steps"; }
expect_err "30 steps (29 forwards"
expect_err "from the checkpoint's h3_defaults.json: size 128x64, frames 107, num_inference_steps 30"
grep -q "vocabulary" "$WORK/err.txt" && { cat "$WORK/err.txt"; fail "a warning for a prompt in the vocabulary"; }
echo "cli first_hour: ok"
