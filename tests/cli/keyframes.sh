#!/usr/bin/env bash
# h3-engine generate --first-frame / --last-frame (fl2va): the keyframes are decoded before the checkpoint is
# opened and put onto the canvas (the checkpoint's canvas multiple) before anything is loaded (bad image files
# are input errors, exit 3, that name the file; usage mistakes exit 2), then encoded by the VAE encoder and
# presented to the conditioner; the tiny model runs fl2va end to end on the CPU with either anchor or both,
# deterministically, and the keyframes change the result.
source "$(dirname "$0")/lib/common.sh" "$@"

IMG="$(cd "$(dirname "$0")/../data/images" && pwd)"
expect_rc 0 "$H3" make-tiny "$WORK/tiny" --seed 1
# the tiny checkpoint's configs without any weights: the request is checked against them, nothing can load
cp -r "$WORK/tiny" "$WORK/configs"; find "$WORK/configs" -name '*.safetensors*' -delete
CFG=("$H3" generate --model "$WORK/configs" --random-prompt-embeds 5 --frames 107 --output "$WORK/o.mp4")
NONE=("$H3" generate --model "$WORK/none" --random-prompt-embeds 5 --frames 107 --output "$WORK/o.mp4")

# ---- before loading anything: the canvas, and the errors
# 23x17 (aspect 1.35) → the 768x1024 canvas; the 37x29 JPEG (after its EXIF rotation 29x37) is cover-cropped.
expect_rc 3 "${CFG[@]}" --first-frame "$IMG/png_rgb.png" --last-frame "$IMG/jpeg_exif6.jpg"
expect_err "2 keyframe(s) on a 1024x768 canvas"; expect_err "vae_encoder"
expect_rc 3 "${CFG[@]}" --last-frame "$IMG/png_rgba.png" --size 256x128
expect_err "1 keyframe(s) on a 256x128 canvas"
expect_rc 3 "${NONE[@]}" --first-frame "$IMG/png_rgb.png"; expect_err "none"
expect_rc 3 "${NONE[@]}" --first-frame "$IMG/missing.png"; expect_err "missing.png"
head -c 300 "$IMG/jpeg_420.jpg" >"$WORK/cut.jpg"
expect_rc 3 "${NONE[@]}" --first-frame "$WORK/cut.jpg"; expect_err "truncated JPEG"
echo "not an image at all" >"$WORK/text.png"
expect_rc 3 "${NONE[@]}" --first-frame "$WORK/text.png"; expect_err "unsupported image format"
expect_rc 2 "${NONE[@]}" --first-frame "$IMG/png_rgb.png" --aspect 1:1; expect_err "aspect does not apply"

# ---- the tiny model end to end (text encoder + vision tower + VAE encoder + DiT + decoders)
GEN=("$H3" generate --model "$WORK/tiny" --prompt "a red ball" --size 64x32 --frames 107 --steps 3 --seed 7)
expect_rc 0 "${GEN[@]}" --first-frame "$IMG/png_rgb.png" --save-latents "$WORK/f1.st" --output "$WORK/f1.mp4"
expect_err "1 keyframe(s) on a 64x32 canvas"; expect_err "encoded 1 keyframe(s)"
expect_err "decoded 107 frames 64x32"
grep -Eq "conditioning [0-9]+ rows, [1-9][0-9]* of them vision" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "no vision rows"; }
head -c 12 "$WORK/f1.mp4" | grep -q ftyp || fail "f1.mp4 has no ftyp box"
expect_rc 0 "$H3" compare "$WORK/f1.mp4" "$WORK/f1.mp4" --json
grep -q '"frames": *107' "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "compare does not see 107 frames"; }
# same seed, same keyframe → the same latents
expect_rc 0 "${GEN[@]}" --first-frame "$IMG/png_rgb.png" --save-latents "$WORK/f1b.st"
cmp -s "$WORK/f1.st" "$WORK/f1b.st" || fail "fl2va is not deterministic"
# another first frame → other latents (the keyframe conditions the result), and t2va differs too
expect_rc 0 "${GEN[@]}" --first-frame "$IMG/jpeg_444.jpg" --save-latents "$WORK/f2.st"
cmp -s "$WORK/f1.st" "$WORK/f2.st" && fail "a different first frame gave the same latents"
expect_rc 0 "${GEN[@]}" --save-latents "$WORK/t2va.st"
cmp -s "$WORK/f1.st" "$WORK/t2va.st" && fail "fl2va gave the t2va latents"
# both anchors, and the last one alone
expect_rc 0 "${GEN[@]}" --first-frame "$IMG/png_rgb.png" --last-frame "$IMG/jpeg_exif6.jpg" \
  --save-latents "$WORK/fl.st"
expect_err "2 keyframe(s) on a 64x32 canvas"; expect_err "encoded 2 keyframe(s)"
cmp -s "$WORK/f1.st" "$WORK/fl.st" && fail "the last frame did not change the latents"
expect_rc 0 "${GEN[@]}" --last-frame "$IMG/jpeg_exif6.jpg" --save-latents "$WORK/l.st"
expect_err "1 keyframe(s) on a 64x32 canvas"
cmp -s "$WORK/l.st" "$WORK/t2va.st" && fail "last-frame fl2va gave the t2va latents"
# precomputed conditioning (the same rows and noise draws either way): the keyframe latents alone change it
RND=("$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 64x32 --frames 107 --steps 3)
expect_rc 0 "${RND[@]}" --first-frame "$IMG/png_rgb.png" --save-latents "$WORK/r.st"
expect_err "not presented to a conditioner"
expect_rc 0 "${RND[@]}" --first-frame "$IMG/jpeg_444.jpg" --save-latents "$WORK/r2.st"
cmp -s "$WORK/r.st" "$WORK/r2.st" && fail "the keyframe latents did not condition the result"
echo "PASS"
