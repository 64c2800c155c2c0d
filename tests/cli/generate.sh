#!/usr/bin/env bash
# h3-engine generate: exit codes, --save-latents contents (vs the PyTorch reference loop on the DiT golden
# model A), --progress json lines, Ctrl-C cancellation, and the tiny model end to end on the CPU.
source "$(dirname "$0")/lib/common.sh" "$@"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"

make_tiny "$WORK/tiny" --seed 1
GEN=("$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 64x32 --frames 107)

# ---- bad requests: usage errors (2) name the field, before any model is loaded
expect_rc 2 "${GEN[@]}" --aspect 5:1 --size 64x32 --save-latents "$WORK/x.st"
expect_rc 2 "$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --aspect 5:1 --save-latents "$WORK/x.st"
expect_err "aspect"; expect_err "\[1/4, 4\]"
expect_rc 2 "$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 100x64 --save-latents "$WORK/x.st"
expect_err "width 100"; expect_err "multiple of 32"
expect_rc 2 "$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --frames 400 --save-latents "$WORK/x.st"
expect_err "frames 400"; expect_err "107 to 345"
expect_rc 2 "$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --seconds 2 --save-latents "$WORK/x.st"
expect_err "seconds"
expect_rc 2 "${GEN[@]}" --steps 1 --save-latents "$WORK/x.st"
expect_err "steps 1"
expect_rc 2 "$H3" generate --model "$WORK/tiny" --size 64x32 --save-latents "$WORK/x.st"
expect_err "prompt"
expect_rc 2 "${GEN[@]}"
expect_err "save-latents"
# --output decodes through the tiny VAEs: an MP4 on the CPU (alone, and together with --save-latents)
expect_rc 0 "${GEN[@]}" --steps 2 --output "$WORK/a.mp4"
[ -s "$WORK/a.mp4" ] || fail "--output wrote no a.mp4"
head -c 12 "$WORK/a.mp4" | grep -q ftyp || fail "a.mp4 has no ftyp box"
expect_err "decoded 107 frames 64x32"
expect_rc 0 "${GEN[@]}" --steps 2 --output "$WORK/a.wav" --save-latents "$WORK/a.st"
[ -s "$WORK/a.wav" ] && [ -s "$WORK/a.st" ] || fail "--output + --save-latents did not write both"
# the saved latents decode to the same audio
expect_rc 0 "$H3" decode --model "$WORK/tiny" --latents "$WORK/a.st" --output "$WORK/a2.wav"
cmp -s "$WORK/a.wav" "$WORK/a2.wav" || fail "decode of --save-latents differs from generate --output"
# a missing / malformed embeddings file is bad input (3)
expect_rc 3 "$H3" generate --model "$WORK/tiny" --prompt-embeds "$WORK/none.st" --size 64x32 --save-latents "$WORK/x.st"
expect_rc 3 "$H3" generate --model "$WORK/tiny" --prompt-embeds "$ROOT/tests/data/pipeline/e2e_t2va.safetensors" \
  --size 64x32 --save-latents "$WORK/x.st"
expect_err "text_dim"

# ---- tiny model end to end on the CPU, JSON progress
expect_rc 0 "${GEN[@]}" --steps 3 --seed 3 --save-latents "$WORK/tiny.st" --progress json
python3 - "$WORK/out.txt" <<'PY' || fail "progress json"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [l for l in lines if l["event"] == "step"]
assert [s["step"] for s in steps] == [1, 2], steps
assert all(s["total"] == 2 and s["seconds"] >= 0 and s["eta"] >= 0 for s in steps), steps
assert steps[-1]["eta"] == 0 and lines[-1]["event"] == "done", lines
PY

# ---- --save-latents vs the reference loop (tests/data/pipeline/e2e_t2va.safetensors), fp32
expect_rc 0 "$H3" generate --model "$ROOT/tests/data/dit/A/diffusers" \
  --prompt-embeds "$ROOT/tests/data/pipeline/e2e_t2va.safetensors" --size 64x32 --frames 107 --steps 4 \
  --seed 2024 --dtype fp32 --save-latents "$WORK/a.st" --progress none
python3 - "$WORK/a.st" "$ROOT/tests/data/pipeline/e2e_t2va.safetensors" <<'PY' || fail "latents vs reference"
import json, struct, sys
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); base = 8 + n; out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        assert v["dtype"] == "F32", (k, v)
        s, e = v["data_offsets"]
        out[k] = (v["shape"], struct.unpack("<%df" % ((e - s) // 4), b[base + s:base + e]))
    return out, h.get("__metadata__", {})
got, meta = load(sys.argv[1]); ref, _ = load(sys.argv[2])
assert sorted(got) == ["audio_latents", "audio_noise", "video_latents", "video_noise"], sorted(got)
assert got["video_latents"][0] == [1, 24, 32, 2, 4] and got["audio_latents"][0] == [2, 32, 178], got.keys()
assert meta["seed"] == "2024" and meta["frames"] == "107", meta
for k in got:
    g, r = got[k][1], ref[k][1]
    err = max(abs(a - b) for a, b in zip(g, r)) / max(abs(b) for b in r)
    tol = 0.0 if k.endswith("noise") else 1e-4
    assert err <= tol, (k, err)
    print(k, "rel err", err)
PY

# ---- Ctrl-C cancels cleanly: exit 130, no latents file
"$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 64x32 --frames 345 --steps 400 \
  --save-latents "$WORK/c.st" --progress json >"$WORK/out.txt" 2>"$WORK/err.txt" &
pid=$!
for _ in $(seq 1 200); do grep -q '"step":1,' "$WORK/out.txt" 2>/dev/null && break; sleep 0.1; done
kill -INT $pid
wait $pid; rc=$?
[ $rc -eq 130 ] || { cat "$WORK/err.txt"; fail "SIGINT exit $rc, expected 130"; }
grep -q "cancelled" "$WORK/err.txt" || fail "no cancellation message"
[ ! -e "$WORK/c.st" ] || fail "a cancelled run wrote latents"
echo "generate: ok"
