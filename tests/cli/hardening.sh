#!/usr/bin/env bash
# Issue #22, the CLI side: strict integers (no wrap, no saturation), range-checked config integers, nesting-
# bounded JSON files, unknown output extensions refused before any model loads, and the README's exit codes
# (2 usage, 3 bad input file) instead of a crash.
source "$(dirname "$0")/lib/common.sh" "$@"

expect_rc 0 "$H3" make-tiny "$WORK/tiny" --seed 1
GEN=("$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 64x32 --frames 107 --steps 2)

# ---- integers: a negative or out-of-range value is a usage error naming the option
expect_rc 2 "${GEN[@]}" --seed -1 --save-latents "$WORK/x.st"
expect_err "\-\-seed"
expect_rc 2 "${GEN[@]}" --seed 18446744073709551616 --save-latents "$WORK/x.st"
expect_err "\-\-seed"
expect_rc 2 "${GEN[@]}" --seed 0x10 --save-latents "$WORK/x.st"
expect_rc 2 "$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --steps 4294967298 --save-latents "$WORK/x.st"
expect_err "\-\-steps"
expect_rc 2 "$H3" serve --model "$WORK/tiny" --ttl -1
expect_rc 2 "$H3" serve --model "$WORK/tiny" --max-body-bytes 18446744073709551617
# the largest seed is accepted
expect_rc 0 "${GEN[@]}" --seed 18446744073709551615 --save-latents "$WORK/max.st"

# ---- output extensions: the allowed ones are named, nothing is loaded or written
expect_rc 2 "${GEN[@]}" --output "$WORK/out.mkv"
expect_err "unknown extension '.mkv'"; expect_err ".mp4"; expect_err ".wav"
[ ! -e "$WORK/out.mkv" ] || fail "out.mkv was written"
expect_rc 2 "$H3" decode --model "$WORK/tiny" --latents "$WORK/max.st" --output "$WORK/out.avi"
expect_err "unknown extension '.avi'"

# ---- config integers are range-checked (2^32 + 2 must not become 2)
cp -r "$WORK/tiny" "$WORK/bad_layers"
python3 - "$WORK/bad_layers/transformer/config.json" <<'PY'
import json, sys
p = sys.argv[1]; c = json.load(open(p)); c["num_layers"] = 2**32 + 2; json.dump(c, open(p, "w"))
PY
expect_rc 3 "$H3" generate --model "$WORK/bad_layers" --random-prompt-embeds 5 --size 64x32 --frames 107 \
  --steps 2 --save-latents "$WORK/y.st"
expect_err "num_layers' = 4294967298 is outside"

# ---- a deeply nested model_index.json or config is a bad input file (3), never a crash
cp -r "$WORK/tiny" "$WORK/nested"
python3 -c "import sys; sys.stdout.write('{\"vae\": ' + '[' * 200000 + '}')" > "$WORK/nested/model_index.json"
expect_rc 3 "$H3" generate --model "$WORK/nested" --random-prompt-embeds 5 --size 64x32 --frames 107 \
  --steps 2 --save-latents "$WORK/z.st"
expect_err "nests deeper than 64"
cp -r "$WORK/tiny" "$WORK/nested_cfg"
python3 -c "import sys; sys.stdout.write('{\"num_layers\": ' + '[' * 200000 + '}')" > "$WORK/nested_cfg/transformer/config.json"
expect_rc 3 "$H3" generate --model "$WORK/nested_cfg" --random-prompt-embeds 5 --size 64x32 --frames 107 \
  --steps 2 --save-latents "$WORK/w.st"
expect_err "nests deeper than 64"

# ---- issue #42: Ctrl-C and SIGTERM land inside a release-size denoise (1344x768, 124 frames: one CPU
# attention call over ~37k rows ran for minutes without reading the flag)
"$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 1344x768 --frames 124 --steps 2 \
  --save-latents "$WORK/big.st" >"$WORK/out.txt" 2>"$WORK/err.txt" &
pid=$!
# the job line comes right before the run; with random prompt rows the run starts with the denoise
for _ in $(seq 1 1200); do grep -q "generate: 1344x768" "$WORK/err.txt" 2>/dev/null && break; sleep 0.1; done
grep -q "generate: 1344x768" "$WORK/err.txt" || { kill -9 $pid; cat "$WORK/err.txt"; fail "no job line"; }
sleep 6 # past the setup, inside the first forward's attention
t0=$(date +%s.%N); kill -INT $pid; wait $pid; rc=$?; t1=$(date +%s.%N)
[ $rc -eq 130 ] || { cat "$WORK/err.txt"; fail "SIGINT in the denoise exited $rc, expected 130"; }
python3 -c "import sys; d = $t1 - $t0; print('generate: Ctrl-C in a release-size denoise took %.3f s' % d); sys.exit(d > 2)" \
  || fail "Ctrl-C took more than 2 s"

if ! "$H3" serve --model "$WORK/none" 2>&1 | grep -q "no HTTP server"; then
  "$H3" serve --model "$WORK/tiny" --device cpu --port 0 --output-dir "$WORK/served" --on-term cancel \
    >"$WORK/serve_out.txt" 2>"$WORK/serve_err.txt" &
  spid=$!
  for _ in $(seq 1 600); do grep -q "listening on" "$WORK/serve_out.txt" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/serve_out.txt")
  [ -n "$port" ] || { kill -9 $spid; cat "$WORK/serve_err.txt"; fail "serve did not listen"; }
  # submit a job with no size (1344x768) and wait until it denoises
  python3 - "$port" <<'PY' || { kill -9 $spid; cat "$WORK/serve_err.txt"; fail "the job did not reach the denoise"; }
import json, sys, time, urllib.request
base = "http://127.0.0.1:%s" % sys.argv[1]
req = urllib.request.Request(base + "/v1/videos", data=json.dumps(
    {"prompt": "a release-size job", "seconds": 5, "num_inference_steps": 2}).encode(),
    headers={"Content-Type": "application/json"})
vid = json.load(urllib.request.urlopen(req))["id"]
deadline = time.time() + 120
while time.time() < deadline:
    v = json.load(urllib.request.urlopen(base + "/v1/videos/" + vid))
    if v["status"] == "in_progress" and v["progress"] >= 5: sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
PY
  sleep 6 # inside the first forward's attention
  t0=$(date +%s.%N); kill -TERM $spid
  for _ in $(seq 1 200); do kill -0 $spid 2>/dev/null || break; sleep 0.05; done
  if kill -0 $spid 2>/dev/null; then kill -9 $spid; fail "serve --on-term cancel was alive 10 s after SIGTERM"; fi
  wait $spid; rc=$?; t1=$(date +%s.%N)
  [ $rc -eq 0 ] || { cat "$WORK/serve_err.txt"; fail "serve exited $rc after SIGTERM, expected 0"; }
  grep -q "serve: stopped" "$WORK/serve_err.txt" || { cat "$WORK/serve_err.txt"; fail "serve did not stop cleanly"; }
  python3 -c "import sys; d = $t1 - $t0; print('serve: SIGTERM in a release-size denoise took %.3f s' % d); sys.exit(d > 2)" \
    || fail "SIGTERM took more than 2 s"
fi
echo "cli hardening: ok"
