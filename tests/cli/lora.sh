#!/usr/bin/env bash
# h3-engine generate --lora on the tiny model: make-tiny --lora writes an adapter; merged and run-time
# application agree, scale 0 equals no adapter, the adapter changes the result; --preset sets steps and shifts
# (explicit flags win); bad --lora arguments and files get clear errors before any weight loads.
source "$(dirname "$0")/lib/common.sh" "$@"
json_check() {
  python3 - "$WORK/out.txt" "$@" <<'PY' || { cat "$WORK/out.txt"; fail "json check: ${*}"; }
import json, math, sys
j = json.load(open(sys.argv[1]))
t = {x["name"]: x for x in j["latents"]["tensors"]}
for expr in sys.argv[2:]:
    assert eval(expr, {"j": j, "t": t, "math": math}), expr
PY
}

expect_rc 0 "$H3" make-tiny "$WORK/tiny" --seed 1 --lora "$WORK/turbo.safetensors"
grep -q "wrote tiny LoRA" "$WORK/out.txt" || fail "make-tiny --lora did not report the adapter"
L="$WORK/turbo.safetensors"
GEN0=("$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 64x32 --frames 107 --seed 3 --progress none)
GEN=("${GEN0[@]}" --steps 4)

expect_rc 0 "${GEN[@]}" --save-latents "$WORK/base.st"
expect_rc 0 "${GEN[@]}" --lora "$L" --save-latents "$WORK/merged.st"
expect_err "LoRA $L: peft"; expect_err "merged into the weights"
expect_rc 0 "${GEN[@]}" --lora "$L" --lora-mode runtime --save-latents "$WORK/runtime.st"
expect_err "applied at run time"
expect_rc 0 "${GEN[@]}" --lora "$L:0" --lora-mode runtime --save-latents "$WORK/zero.st"
expect_rc 0 "${GEN[@]}" --lora "$L:0.5" --lora "$L:0.5" --save-latents "$WORK/halves.st"

# scale 0 is the base bit for bit
expect_rc 0 "$H3" compare "$WORK/base.st" "$WORK/zero.st" --json
json_check 't["video_latents"]["max_abs_diff"] == 0 and t["audio_latents"]["max_abs_diff"] == 0'
# the adapter moves the latents; merged and run time agree within bf16 rounding
expect_rc 0 "$H3" compare "$WORK/base.st" "$WORK/merged.st" --json
json_check 't["video_latents"]["rel_rms"] > 1e-2'
expect_rc 0 "$H3" compare "$WORK/runtime.st" "$WORK/merged.st" --json
json_check 't["video_latents"]["rel_rms"] < 2e-2 and t["audio_latents"]["rel_rms"] < 2e-2'
# two halves of the adapter add up to the whole (merged: one fp32 sum, one rounding)
expect_rc 0 "$H3" compare "$WORK/merged.st" "$WORK/halves.st" --json
json_check 't["video_latents"]["rel_rms"] < 2e-2'

# ---- presets: steps and shifts; explicit flags win
expect_rc 0 "${GEN0[@]}" --preset turbo-4step-768p --save-latents "$WORK/p.st"
expect_err "5 steps (4 forwards)"; expect_err "shifts 6/3"
expect_rc 0 "${GEN0[@]}" --preset turbo-8step-544p --steps 3 --audio-shift 2 --save-latents "$WORK/p.st"
expect_err "3 steps (2 forwards)"; expect_err "shifts 12/2"
expect_rc 0 "${GEN[@]}" --video-shift 5 --save-latents "$WORK/p.st"
expect_err "shifts 5/3"
expect_rc 2 "${GEN[@]}" --preset turbo-1step --save-latents "$WORK/p.st"
expect_err "turbo-1step"
# the help into a file first: `| grep -q` stops reading at its match, and with pipefail the writer's SIGPIPE
# fails the pipeline whenever the match comes before the help's last write
"$H3" generate --help > "$WORK/help.txt" || fail "generate --help failed"
grep -q "turbo-4step-768p" "$WORK/help.txt" || fail "--help does not list the presets"

# ---- bad --lora: named, before any weight loads
expect_rc 3 "${GEN[@]}" --lora "$WORK/missing.safetensors" --save-latents "$WORK/x.st"
expect_err "missing.safetensors"
printf 'not a safetensors file' > "$WORK/junk.safetensors"
expect_rc 3 "${GEN[@]}" --lora "$WORK/junk.safetensors" --save-latents "$WORK/x.st"
expect_err "junk.safetensors"
expect_rc 2 "${GEN[@]}" --lora "$L:inf" --save-latents "$WORK/x.st"
expect_err "finite"
expect_rc 2 "${GEN[@]}" --lora "$L" --lora-mode sometimes --save-latents "$WORK/x.st"
echo "cli_lora ok"
