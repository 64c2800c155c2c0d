#!/usr/bin/env bash
# h3-engine generate --first-frame / --last-frame: the keyframes are decoded and put onto the canvas before
# anything is loaded, then the request stops with a clear "not built yet" (runtime error, exit 4); bad image
# files are input errors (exit 3) that name the file, usage mistakes exit 2.
set -uo pipefail
H3="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "FAIL: $*"; exit 1; }
expect_rc() { local want=$1; shift; "$@" >"$WORK/out.txt" 2>"$WORK/err.txt"; local rc=$?;
  [ $rc -eq "$want" ] || { cat "$WORK/out.txt" "$WORK/err.txt"; fail "'$*' exited $rc, expected $want"; }; }
expect_err() { grep -q -- "$1" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "stderr lacks '$1'"; }; }

IMG="$(cd "$(dirname "$0")/../data/images" && pwd)"
GEN=("$H3" generate --model "$WORK/none" --random-prompt-embeds 5 --frames 107 --output "$WORK/o.mp4")

# 23x17 (aspect 1.35) → the 768x1024 canvas; the 37x29 JPEG (after its EXIF rotation 29x37) is cover-cropped.
expect_rc 4 "${GEN[@]}" --first-frame "$IMG/png_rgb.png" --last-frame "$IMG/jpeg_exif6.jpg"
expect_err "2 keyframe(s) on a 1024x768 canvas, 1536 image tokens"
expect_err "fl2va needs the VAE encoder and vision tower (not built yet)"
expect_rc 4 "${GEN[@]}" --last-frame "$IMG/png_rgba.png" --size 256x128
expect_err "1 keyframe(s) on a 256x128 canvas"
expect_rc 3 "${GEN[@]}" --first-frame "$IMG/missing.png"; expect_err "missing.png"
head -c 300 "$IMG/jpeg_420.jpg" >"$WORK/cut.jpg"
expect_rc 3 "${GEN[@]}" --first-frame "$WORK/cut.jpg"; expect_err "truncated JPEG"
echo "not an image at all" >"$WORK/text.png"
expect_rc 3 "${GEN[@]}" --first-frame "$WORK/text.png"; expect_err "unsupported image format"
expect_rc 2 "${GEN[@]}" --first-frame "$IMG/png_rgb.png" --aspect 1:1; expect_err "aspect does not apply"
echo "PASS"
