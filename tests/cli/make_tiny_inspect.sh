#!/usr/bin/env bash
# make-tiny in both layouts → inspect finds every tensor with the expected shapes; exit codes; bad input.
source "$(dirname "$0")/lib/common.sh" "$@"

expect_rc 0 "$H3" --version
grep -q "h3-engine" "$WORK/out.txt" || fail "--version prints no name"
expect_rc 0 "$H3" --help
expect_rc 2 "$H3" no-such-command
expect_rc 2 "$H3" make-tiny "$WORK/x" --layout nope

expect_rc 0 "$H3" make-tiny "$WORK/d" --seed 3
expect_rc 0 "$H3" make-tiny "$WORK/o" --seed 3 --layout original
for d in d o; do
  expect_rc 0 "$H3" inspect "$WORK/$d" --json --strict
  python3 - "$WORK/out.txt" "$d" <<'PY' || fail "inspect json for $d"
import json, sys
r = json.load(open(sys.argv[1])); layout = sys.argv[2]
assert r["ok"], r
names = sorted(c["name"] for c in r["components"] if c.get("weights"))
want = ["text_encoder", "transformer", "transformer_ref"]
if layout == "d":
    want = sorted(want + ["vae", "audio_vae"])  # the decoders (diffusers layout only)
assert names == want, names
for c in r["components"]:
    if c.get("weights") and c["name"].startswith("transformer"):
        conf = c["conformance"]
        assert conf["ok"] and not conf["missing"] and not conf["unexpected"], conf
        assert c["weights"]["files"] == 2, c
assert r["video_shift"] == 12.0 and r["audio_shift"] == 3.0, r
assert r["layout"] == {"d": "diffusers", "o": "original"}[layout], r["layout"]
PY
done
# text output names the components
expect_rc 0 "$H3" inspect "$WORK/d"
grep -q "transformer_ref" "$WORK/out.txt" || fail "text inspect lacks transformer_ref"
# a single shard is inspectable as a tensor set
shard=$(ls "$WORK"/d/transformer/*.safetensors | head -1)
expect_rc 0 "$H3" inspect "$shard" --json
# same seed → identical bytes
expect_rc 0 "$H3" make-tiny "$WORK/d2" --seed 3
cmp -s "$WORK/d/transformer/diffusion_pytorch_model-00001-of-00002.safetensors" \
       "$WORK/d2/transformer/diffusion_pytorch_model-00001-of-00002.safetensors" || fail "make-tiny not deterministic"
# bad input: missing path → 3; truncated shard → 3 with the file named; a removed tensor is reported missing
expect_rc 3 "$H3" inspect "$WORK/nope"
cp -r "$WORK/d" "$WORK/bad"
f="$WORK/bad/transformer/diffusion_pytorch_model-00002-of-00002.safetensors"
head -c 100 "$f" > "$f.tmp" && mv "$f.tmp" "$f"
expect_rc 3 "$H3" inspect "$WORK/bad" --strict
grep -q "00002-of-00002" "$WORK/out.txt" "$WORK/err.txt" || fail "truncated shard not named"
echo "make_tiny_inspect: all checks passed"
