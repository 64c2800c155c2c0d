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

# ---- issue #42: exit codes and messages as the README states them
IMG="$(cd "$(dirname "$0")/../data/images" && pwd)"
# a component folder without its config.json: 3, naming the missing file (not "has no transformer/", 2)
cp -r "$WORK/tiny" "$WORK/no_cfg"; rm "$WORK/no_cfg/transformer/config.json"
expect_rc 3 "$H3" generate --model "$WORK/no_cfg" --random-prompt-embeds 5 --size 64x32 --frames 107 --steps 2 \
  --save-latents "$WORK/c.st"
expect_err "no_cfg/transformer/config.json does not exist"
# a model path that is a file: 3
expect_rc 3 "$H3" generate --model "$WORK/tiny/model_index.json" --random-prompt-embeds 5 --size 64x32 \
  --frames 107 --steps 2 --save-latents "$WORK/f.st"
expect_err "is not a folder"
# a device as an input file: 3, never read
for dev in /dev/zero /dev/urandom; do
  expect_rc 3 "$H3" inspect "$dev"; expect_err "$dev is not a regular file"
  expect_rc 3 "${GEN[@]}" --first-frame "$dev" --save-latents "$WORK/d.st"; expect_err "is not a regular file"
done
# an unknown command is named, with the nearest one
expect_rc 2 "$H3" explode; expect_err "unknown command 'explode'"; expect_err "did you mean 'encode'"
expect_rc 2 "$H3" --log-level info genrate --model x; expect_err "did you mean 'generate'"
# a reference whose given kind is wrong is refused before anything is loaded (the model does not exist),
# naming the file
for kind in video audio; do
  expect_rc 3 "$H3" generate --model "$WORK/none" --prompt x --frames 107 --output "$WORK/o.mp4" \
    --reference "$kind:$IMG/png_rgb.png"
  expect_err "png_rgb.png: is an image (png), not"
done
echo "cli hardening: ok"
