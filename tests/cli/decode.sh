#!/usr/bin/env bash
# h3-engine decode: make-tiny → a latents file (python3 struct writer, the --save-latents format) → MP4 /
# WAV / PNG directory; exit codes; bad latents and a checkpoint without decoders are clear errors.
source "$(dirname "$0")/lib/common.sh" "$@"
nonempty() { [ -s "$1" ] || fail "$1 missing or empty"; }

# write_latents FILE NAME:D0xD1x... [NAME:SHAPE ...] (fp32, deterministic values; shape "bad" = rank 2)
write_latents() {
  python3 - "$@" <<'PY'
import json, math, struct, sys
path, specs = sys.argv[1], sys.argv[2:]
header, blobs, off = {}, [], 0
for k, spec in enumerate(specs):
    name, shape = spec.split(":")
    shape = [int(d) for d in shape.split("x")]
    n = math.prod(shape)
    data = struct.pack("<%df" % n, *[math.sin(0.37 * i + k) * 1.5 for i in range(n)])
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(data)]}
    blobs.append(data); off += len(data)
h = json.dumps(header).encode(); h += b" " * ((8 - len(h) % 8) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h)
    for b in blobs: f.write(b)
PY
}

expect_rc 0 "$H3" make-tiny "$WORK/tiny" --seed 2
# 7 latent frames of 2×4 → 22 frames of 32×64; 37 audio latents → 29600 samples per channel
write_latents "$WORK/lat.st" video_latents:1x24x7x2x4 audio_latents:2x32x37
DEC=("$H3" decode --model "$WORK/tiny" --latents "$WORK/lat.st")

expect_rc 0 "${DEC[@]}" --output "$WORK/x.mp4"
nonempty "$WORK/x.mp4"
expect_err "22 frames 64x32"; expect_err "29600 audio samples at 32000 Hz"
head -c 12 "$WORK/x.mp4" | grep -q "ftyp" || fail "x.mp4 has no ftyp box"

expect_rc 0 "${DEC[@]}" --output "$WORK/x.wav"
nonempty "$WORK/x.wav"
# RIFF header + 2 ch × 16 bit × 29600 samples
[ "$(stat -c %s "$WORK/x.wav")" -ge $((44 + 4 * 29600)) ] || fail "x.wav too small"
head -c 4 "$WORK/x.wav" | grep -q "RIFF" || fail "x.wav is not RIFF"
expect_rc 0 "${DEC[@]}" --output "$WORK/xf.wav" --wav-format float
[ "$(stat -c %s "$WORK/xf.wav")" -ge $((44 + 8 * 29600)) ] || fail "float wav too small"

expect_rc 0 "${DEC[@]}" --output "$WORK/frames"
[ "$(ls "$WORK"/frames/*.png | wc -l)" -eq 22 ] || fail "expected 22 PNG frames"
nonempty "$(ls "$WORK"/frames/*.png | head -1)"
nonempty "$WORK/frames/audio.wav"

# video-only latents → an MP4 without audio; audio-only latents → WAV, but no MP4 (needs video)
write_latents "$WORK/v.st" video_latents:1x24x7x2x4
expect_rc 0 "$H3" decode --model "$WORK/tiny" --latents "$WORK/v.st" --output "$WORK/v.mp4"
nonempty "$WORK/v.mp4"
write_latents "$WORK/a.st" audio_latents:2x32x10
expect_rc 0 "$H3" decode --model "$WORK/tiny" --latents "$WORK/a.st" --output "$WORK/a.wav"
nonempty "$WORK/a.wav"
expect_rc 2 "$H3" decode --model "$WORK/tiny" --latents "$WORK/a.st" --output "$WORK/a.mp4"
expect_err "needs video latents"
[ ! -e "$WORK/a.mp4" ] || fail "a failed decode wrote a.mp4"

# ---- bad latents: wrong rank, wrong channels, too few frames, no known tensor, not a file → exit 3 / 2
write_latents "$WORK/bad1.st" video_latents:24x7x2x4
expect_rc 3 "$H3" decode --model "$WORK/tiny" --latents "$WORK/bad1.st" --output "$WORK/b.mp4"
expect_err "video_latents must be"
write_latents "$WORK/bad2.st" video_latents:1x16x7x2x4
expect_rc 2 "$H3" decode --model "$WORK/tiny" --latents "$WORK/bad2.st" --output "$WORK/b.mp4"
expect_err "latents must be \[1, 24"
write_latents "$WORK/bad3.st" video_latents:1x24x1x2x4
expect_rc 2 "$H3" decode --model "$WORK/tiny" --latents "$WORK/bad3.st" --output "$WORK/b.mp4"
expect_err "too few"
write_latents "$WORK/bad4.st" other:1x2
expect_rc 3 "$H3" decode --model "$WORK/tiny" --latents "$WORK/bad4.st" --output "$WORK/b.mp4"
expect_err "neither"
expect_rc 3 "$H3" decode --model "$WORK/tiny" --latents "$WORK/none.st" --output "$WORK/b.mp4"
echo "not safetensors" > "$WORK/junk.st"
expect_rc 3 "$H3" decode --model "$WORK/tiny" --latents "$WORK/junk.st" --output "$WORK/b.mp4"
[ ! -e "$WORK/b.mp4" ] || fail "a failed decode wrote b.mp4"
# usage: missing --output
expect_rc 2 "$H3" decode --model "$WORK/tiny" --latents "$WORK/lat.st"
# a checkpoint without decoders (original layout) → not found, the component named
expect_rc 0 "$H3" make-tiny "$WORK/orig" --seed 2 --layout original
"$H3" decode --model "$WORK/orig" --latents "$WORK/lat.st" --output "$WORK/o.mp4" >"$WORK/out.txt" 2>"$WORK/err.txt"
rc=$?; [ $rc -ne 0 ] || fail "decode without a vae succeeded"
expect_err "vae"
echo "decode: all checks passed"
