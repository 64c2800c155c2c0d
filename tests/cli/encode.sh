#!/usr/bin/env bash
# encode: --tokens-only on the tiny and (when present) the official tokenizer; embeddings from the tiny
# checkpoint in both layouts and both dtypes; usable as --prompt-embeds input format; errors.
source "$(dirname "$0")/lib/common.sh" "$@"

expect_rc 0 "$H3" make-tiny "$WORK/d" --seed 5
expect_rc 0 "$H3" make-tiny "$WORK/o" --seed 5 --layout original
P='A cat sits on the windowsill. <d>At sunset</d> [Shot 1] 猫 🙂'
expect_rc 0 "$H3" encode --model "$WORK/d" --prompt "$P" --tokens-only
cp "$WORK/out.txt" "$WORK/ids_d.json"
python3 - "$WORK/ids_d.json" "$WORK/d/tokenizer/tokenizer_config.json" <<'PY' || fail "tiny ids"
import json, sys
ids = json.load(open(sys.argv[1]))
assert isinstance(ids, list) and all(isinstance(i, int) for i in ids), ids
cfg = json.load(open(sys.argv[2]))
# <d> and </d> are single added tokens after the decoder's ids
assert len(set(ids)) > 5 and max(ids) < 400, ids
n_dec = max(int(k) for k in cfg["added_tokens_decoder"])
assert n_dec + 1 in ids and n_dec + 2 in ids, (n_dec, ids)
PY
# the tokenizer folder itself works too, and --output writes the same array
expect_rc 0 "$H3" encode --model "$WORK/d/tokenizer" --prompt "$P" --tokens-only --output "$WORK/ids2.json"
cmp -s "$WORK/ids2.json" "$WORK/ids_d.json" || fail "tokens-only --output differs from stdout"
OFF="$(dirname "$0")/../../../shared/h3-official/tokenizer"
if [ -f "$OFF/vocab.json" ]; then
  expect_rc 0 "$H3" encode --model "$OFF" --prompt "<d>A dog runs.</d>" --tokens-only
  [ "$(cat "$WORK/out.txt")" = "[151669,32,5562,8473,13,151670]" ] || fail "official ids: $(cat "$WORK/out.txt")"
fi
for layout in d o; do
  for dt in bf16 fp32; do
    expect_rc 0 "$H3" encode --model "$WORK/$layout" --prompt "$P" --output "$WORK/e_${layout}_$dt.safetensors" --dtype $dt
  done
done
python3 - "$WORK" "$WORK/ids_d.json" <<'PY' || fail "embeddings file"
import json, struct, sys
w = sys.argv[1]
ids = json.load(open(sys.argv[2]))
def header(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; return json.loads(b[8:8 + n]), b, 8 + n
for name in ["e_d_bf16", "e_d_fp32", "e_o_bf16"]:
    h, b, base = header(f"{w}/{name}.safetensors")
    e = h["prompt_embeds"]
    assert e["shape"] == [len(ids), 64], e
    assert e["dtype"] == ("F32" if "fp32" in name else "BF16"), e
    assert h["prompt_tags"]["dtype"] == "I32" and h["prompt_tags"]["shape"] == [len(ids)]
    s, t = h["input_ids"]["data_offsets"]
    got = list(struct.unpack(f"<{len(ids)}i", b[base + s:base + t]))
    assert got == ids, (got, ids)
# both layouts carry the same text encoder (same seed) -> identical embeddings; fp32 differs from bf16
def embeds(name):
    h, b, base = header(f"{w}/{name}.safetensors"); s, t = h["prompt_embeds"]["data_offsets"]
    return b[base + s:base + t]
assert embeds("e_d_bf16") == embeds("e_o_bf16"), "layouts disagree"
assert embeds("e_d_fp32") == embeds("e_o_fp32"), "layouts disagree (fp32)"
assert len(set(embeds("e_d_bf16"))) > 16, "embeddings look constant"
PY
# presented prompts: the keyframes (fl2va) and references (ref2va) with the prompt, exactly as generate
# presents them (its conditioning from encode's rows equals generate's own, bit for bit)
IMG="$(cd "$(dirname "$0")/../data/images" && pwd)"
KF=(--first-frame "$IMG/png_rgb.png" --size 64x64)
expect_rc 0 "$H3" encode --model "$WORK/d" --prompt "a cat" "${KF[@]}" --output "$WORK/kf.safetensors"
grep -q "vision rows" "$WORK/out.txt" || fail "keyframe encode: $(cat "$WORK/out.txt")"
G=("$H3" generate --model "$WORK/d" "${KF[@]}" --frames 107 --steps 2 --seed 3)
expect_rc 0 "${G[@]}" --prompt-embeds "$WORK/kf.safetensors" --save-latents "$WORK/kf_a.st"
expect_rc 0 "${G[@]}" --prompt "a cat" --save-latents "$WORK/kf_b.st"
cmp -s "$WORK/kf_a.st" "$WORK/kf_b.st" || fail "generate from encode's keyframe rows differs from generate --prompt"
expect_rc 0 "$H3" encode --model "$WORK/d" --prompt "<Picture 1> runs" --reference "$IMG/png_rgb.png" \
  --reference-image-edge 32 --frames 107 --output "$WORK/rf.safetensors"
python3 - "$WORK" <<'PY' || fail "presented rows"
import json, struct, sys
for name in ("kf", "rf"):
    b = open(f"{sys.argv[1]}/{name}.safetensors", "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); base = 8 + n
    assert "input_ids" not in h, name
    L = h["prompt_embeds"]["shape"][0]
    s, t = h["prompt_tags"]["data_offsets"]
    tags = struct.unpack(f"<{L}i", b[base + s:base + t])
    assert set(tags) == {0, 1} and tags.count(0) > 4, (name, tags)  # vision rows are tagged video (0)
    assert h["__metadata__"]["task"] == {"kf": "fl2va", "rf": "ref2va"}[name], h["__metadata__"]
PY
expect_rc 2 "$H3" encode --model "$WORK/d" --prompt x "${KF[@]}" --reference "$IMG/png_rgb.png" --output "$WORK/x.st"
grep -q "cannot be combined" "$WORK/err.txt" || fail "keyframes + references message: $(cat "$WORK/err.txt")"
expect_rc 2 "$H3" encode --model "$WORK/d" --prompt x --size 64x64 --output "$WORK/x.st"
grep -q -- "--size applies with" "$WORK/err.txt" || fail "--size alone message: $(cat "$WORK/err.txt")"
# errors: missing model → 3; no tokenizer → 3; empty prompt → 2; invalid dtype → 2; no --output → 2
expect_rc 3 "$H3" encode --model "$WORK/nope" --prompt x --tokens-only
expect_rc 3 "$H3" encode --model "$WORK/d/transformer" --prompt x --tokens-only
grep -q "holds no tokenizer" "$WORK/err.txt" || fail "no-tokenizer message: $(cat "$WORK/err.txt")"
expect_rc 2 "$H3" encode --model "$WORK/d" --prompt "" --output "$WORK/x.safetensors"
grep -q "prompt" "$WORK/err.txt" || fail "empty prompt message"
expect_rc 2 "$H3" encode --model "$WORK/d" --prompt x --output "$WORK/x.safetensors" --dtype fp16
expect_rc 2 "$H3" encode --model "$WORK/d" --prompt x
echo "encode: all checks passed"
