#!/usr/bin/env bash
# h3-engine generate --reference (ref2va): references are read by content (image / video with its soundtrack /
# audio, or forced with image: video: audio:), checked against diffusers' rules and normalized before anything is
# loaded (each broken rule is a usage error naming it; clips longer than the generated video are cut to it, short
# ones used whole), then encoded (video VAE encoder, audio VAE encoder),
# presented to the conditioner with the prompt and laid out on the rotary clock for the Ref2VA DiT
# (transformer_ref/). The tiny model runs ref2va end to end on the CPU at reduced reference sizes
# (--reference-image-edge / --reference-video-edge), deterministically, and order and content matter.
source "$(dirname "$0")/lib/common.sh" "$@"

IMG="$(cd "$(dirname "$0")/../data/images" && pwd)"
expect_rc 0 "$H3" make-tiny "$WORK/tiny" --seed 1

# ---- reference media made by the engine itself: a 107-frame 64x32 clip with its soundtrack, and a WAV
MK=("$H3" generate --model "$WORK/tiny" --prompt "waves" --size 64x32 --frames 107 --steps 2 --progress none)
expect_rc 0 "${MK[@]}" --seed 1 --output "$WORK/clip.mp4"
expect_rc 0 "${MK[@]}" --seed 2 --output "$WORK/voice.wav"
# 1.5 s of it (44-byte header + 1.5 s of 32 kHz stereo PCM16; the reader stops at the end of the file): short
head -c $((44 + 48000 * 4)) "$WORK/voice.wav" >"$WORK/short.wav"
# a 32 kHz stereo PCM16 WAV of the given data (le32: a little-endian word as printf escapes)
le32() { printf '\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
wav() { local n; n=$(stat -c %s "$1")
  { printf 'RIFF'; printf "$(le32 $((36 + n)))"; printf 'WAVEfmt '; printf "$(le32 16)"; printf '\x01\x00\x02\x00'
    printf "$(le32 32000)"; printf "$(le32 128000)"; printf '\x04\x00\x10\x00data'; printf "$(le32 "$n")"
    cat "$1"; } >"$2"; }
# 17.8 s (the soundtrack four times over) and its first int(107/24 · 32000) = 142666 samples
tail -c +45 "$WORK/voice.wav" >"$WORK/pcm1"; cat "$WORK/pcm1" "$WORK/pcm1" "$WORK/pcm1" "$WORK/pcm1" >"$WORK/pcm4"
wav "$WORK/pcm4" "$WORK/long.wav"; head -c $((142666 * 4)) "$WORK/pcm4" >"$WORK/pcm_cut"; wav "$WORK/pcm_cut" "$WORK/cut.wav"

# ---- the rules, before anything is loaded (usage errors, exit 2)
NONE=("$H3" generate --model "$WORK/none" --prompt "x" --frames 107 --output "$WORK/o.mp4")
expect_rc 2 "${NONE[@]}" --reference "$WORK/voice.wav"; expect_err "cannot be used alone"
expect_rc 2 "${NONE[@]}" --reference "$WORK/clip.mp4" --reference "$WORK/clip.mp4" --reference "$WORK/clip.mp4" \
  --reference "$WORK/clip.mp4"; expect_err "4 video references; at most 3"
args=(); for i in 1 2 3 4 5 6 7 8 9 10; do args+=(--reference "$IMG/png_rgb.png"); done
expect_rc 2 "${NONE[@]}" "${args[@]}"; expect_err "10 image references; at most 9"
expect_rc 2 "${NONE[@]}" --reference "$IMG/png_rgb.png" --first-frame "$IMG/png_rgb.png"
expect_err "cannot be combined"
expect_rc 2 "$H3" generate --model "$WORK/none" --random-prompt-embeds 4 --frames 107 --output "$WORK/o.mp4" \
  --reference "$IMG/png_rgb.png"; expect_err "--prompt is required with references"
expect_rc 3 "${NONE[@]}" --reference "$WORK/missing.mp4"; expect_err "missing.mp4"
echo "not media" >"$WORK/junk.bin"
expect_rc 3 "${NONE[@]}" --reference "$WORK/junk.bin"; expect_err "junk.bin"
expect_rc 3 "${NONE[@]}" --reference "image:$WORK/voice.wav"; expect_err "voice.wav"

# ---- end to end on the tiny model: image, video (+ soundtrack), audio
GEN=("$H3" generate --model "$WORK/tiny" --prompt "a red ball" --size 64x32 --frames 107 --steps 3 --seed 7
     --reference-image-edge 64 --reference-video-edge 32 --progress none)
REFS=(--reference "$IMG/png_rgb.png" --reference "$WORK/clip.mp4" --reference "$WORK/voice.wav")
expect_rc 0 "${GEN[@]}" "${REFS[@]}" --save-latents "$WORK/r1.st" --output "$WORK/r1.mp4"
expect_err "3 reference(s)"; expect_err "encoded 3 reference(s)"; expect_err "decoded 107 frames 64x32"
grep -Eq "conditioning [0-9]+ rows, [1-9][0-9]* of them vision" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "no vision rows"; }
head -c 12 "$WORK/r1.mp4" | grep -q ftyp || fail "r1.mp4 has no ftyp box"
# deterministic
expect_rc 0 "${GEN[@]}" "${REFS[@]}" --save-latents "$WORK/r1b.st"
cmp -s "$WORK/r1.st" "$WORK/r1b.st" || fail "ref2va is not deterministic"
# the order is part of the request
expect_rc 0 "${GEN[@]}" --reference "$WORK/clip.mp4" --reference "$IMG/png_rgb.png" --reference "$WORK/voice.wav" \
  --save-latents "$WORK/r2.st"
cmp -s "$WORK/r1.st" "$WORK/r2.st" && fail "another reference order gave the same latents"
# the audio reference conditions the result; a video's soundtrack alone (audio:) is an audio reference
expect_rc 0 "${GEN[@]}" --reference "$IMG/png_rgb.png" --reference "$WORK/clip.mp4" --save-latents "$WORK/r3.st"
expect_err "2 reference(s)"
cmp -s "$WORK/r1.st" "$WORK/r3.st" && fail "the audio reference did not change the latents"
expect_rc 0 "${GEN[@]}" --reference "$IMG/jpeg_444.jpg" --reference "audio:$WORK/clip.mp4" \
  --save-latents "$WORK/r4.st"
cmp -s "$WORK/r3.st" "$WORK/r4.st" && fail "different references gave the same latents"
# clip length is no rule: a 17.8 s clip is cut to the generated 107 frames (the same latents as the clip cut to
# int(107/24 · 32000) samples beforehand), a 1.5 s one is used whole
expect_rc 0 "${GEN[@]}" --reference "$IMG/png_rgb.png" --reference "$WORK/long.wav" --reference "$WORK/short.wav" \
  --save-latents "$WORK/long.st"
expect_err "3 reference(s)"
expect_rc 0 "${GEN[@]}" --reference "$IMG/png_rgb.png" --reference "$WORK/cut.wav" --reference "$WORK/short.wav" \
  --save-latents "$WORK/cut.st"
cmp -s "$WORK/long.st" "$WORK/cut.st" || fail "a long audio reference is not cut to the generated length"
# t2va on the same seed differs (and runs on the other DiT)
expect_rc 0 "${GEN[@]}" --save-latents "$WORK/t2va.st"
cmp -s "$WORK/r1.st" "$WORK/t2va.st" && fail "ref2va gave the t2va latents"
echo "ok"
