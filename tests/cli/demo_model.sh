#!/usr/bin/env bash
# The embedded demo model (models/h3-demo, trained by tools/train_demo): `inspect --strict` reports it clean;
# `generate` with no --model runs it at its native size; the clip of a fixed prompt and seed (fp32, CPU) matches
# the golden statistics in tests/data/demo/ (tools/train_demo/clip_stats.py: frame means, the shape's centroid
# and size, the sound's RMS envelope and pitch: a numerical regression anywhere in the engine changes them), and
# follows its prompt: a blue shape on the light background, moving right over the first frames, with the
# square's 330 Hz tone at its bounces. H3_UPDATE_GOLDEN=1 rewrites the golden from this run.
source "$(dirname "$0")/lib/common.sh" "$@"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEMO="$ROOT/models/h3-demo"
GOLDEN="$ROOT/tests/data/demo/t2va_blue_square_right.json"
# numpy comes with Debian's python3-numpy (scripts/install_deps.sh), for /usr/bin/python3
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
"$PY" -c "import numpy" 2>/dev/null || fail "$PY has no numpy (Debian: apt-get install python3-numpy)"

expect_rc 0 "$H3" inspect "$DEMO" --strict
grep -q "transformer (MiniMaxH3Transformer3DModel)" "$WORK/out.txt" || fail "inspect lists no transformer"
[ "$(grep -c 'all tensors present with the expected shapes' "$WORK/out.txt")" = 2 ] ||
  { cat "$WORK/out.txt"; fail "inspect: transformer/ and transformer_ref/ not both clean"; }

PROMPT="a blue square bounces to the right on a light background"
expect_rc 0 "$H3" generate --prompt "$PROMPT" --seed 1 --steps 30 --dtype fp32 --device cpu --progress none \
  --output "$WORK/frames/" --save-latents "$WORK/t2va.safetensors"
expect_err "the embedded tiny demo model"
expect_err "not MiniMax-H3"
[ -f "$WORK/frames/frame_00106.png" ] && [ ! -f "$WORK/frames/frame_00107.png" ] ||
  fail "expected the demo's native 107 frames"
expect_rc 0 "$H3" decode --model "$DEMO" --latents "$WORK/t2va.safetensors" --output "$WORK/t2va.wav"

if [ "${H3_UPDATE_GOLDEN:-0}" = 1 ]; then
  mkdir -p "$(dirname "$GOLDEN")"
  "$PY" "$ROOT/tools/train_demo/clip_stats.py" "$WORK/frames" "$WORK/t2va.wav" --golden "$GOLDEN" --update || fail "update"
fi
"$PY" "$ROOT/tools/train_demo/clip_stats.py" "$WORK/frames" "$WORK/t2va.wav" --json "$WORK/stats.json" \
  --golden "$GOLDEN" || fail "the demo clip moved from its golden statistics"

# the prompt, read off the clip (not off the golden)
"$PY" - "$WORK/stats.json" <<'PY' || fail "the demo clip does not follow its prompt"
import json, sys
s = json.load(open(sys.argv[1]))
f, a = s["frames"], s["audio"]
bad = []
for k in ("0", "4", "8"):
    if f[k].get("colour") != "blue" or f[k]["background"] != "light":
        bad.append(f"frame {k}: {f[k].get('colour')} on {f[k]['background']}, expected blue on light")
if "centroid" in f["0"] and "centroid" in f["8"]:
    dx = f["8"]["centroid"][0] - f["0"]["centroid"][0]
    if dx < 8.0:  # the training clips move 2.4 px a frame: 19 px over frames 0..8
        bad.append(f"the shape moved {dx:.1f} px right over frames 0..8, expected at least 8")
else:
    bad.append("no shape in frame 0 or 8")
if max(a["rms"]) < 0.02:
    bad.append(f"no bounce tone: loudest 0.1 s window RMS {max(a['rms'])}")
if abs(a["peak_hz"] - 330.0) > 15.0:
    bad.append(f"the tone is at {a['peak_hz']} Hz, the square's is 330 Hz")
print("\n".join(bad) if bad else "the clip follows its prompt")
sys.exit(1 if bad else 0)
PY
# the quality harness on the demo model at a small size (6 grid points): the lossless rerun exact, a lossy cache
# finite and below it, on fewer block evaluations
expect_rc 0 "$H3" bench quality --model "$DEMO" --size 128x64 --steps 6 --cases ball --settings lossless,velocity \
  --json --output "$WORK/q.json"
"$PY" - "$WORK/q.json" <<'PY' || fail "bench quality on the demo model"
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["name"]: r for r in d["settings"]}
L, V = rows["lossless"], rows["velocity"]
assert L["status"] == "measured" and L["video"]["psnr_db"] == "inf" and L["video"]["ssim_mean"] == 1.0, L
assert V["status"] == "measured" and isinstance(V["video"]["psnr_db"], float) and V["video"]["psnr_db"] > 10.0, V
assert V["work"]["blocks_executed"] < L["work"]["blocks_executed"], V
print(f"bench quality on the demo model: velocity reuse PSNR {V['video']['psnr_db']:.2f} dB on "
      f"{V['work']['blocks_executed']} of {L['work']['blocks_executed']} blocks")
PY
echo "cli demo_model: ok"
