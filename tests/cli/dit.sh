#!/usr/bin/env bash
# `h3-engine dit` on the golden inputs: both formats, both dtypes, dumps, the AdaLN cache, and bad input.
set -uo pipefail
H3="$1"; WORK="$2"
DATA="$(cd "$(dirname "$0")/../data/dit" && pwd)"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "FAIL: $*"; exit 1; }
expect_rc() { local want=$1; shift; "$@" >"$WORK/out.txt" 2>"$WORK/err.txt"; local rc=$?;
  [ $rc -eq "$want" ] || { cat "$WORK/out.txt" "$WORK/err.txt"; fail "'$*' exited $rc, expected $want"; }; }
[ -f "$DATA/A/inputs.safetensors" ] || { echo "no goldens"; exit 1; }

for layout in diffusers original; do
  for dt in fp32 bf16; do
    expect_rc 0 "$H3" dit --model "$DATA/A/$layout" --inputs "$DATA/A/inputs.safetensors" \
      --output "$WORK/$layout-$dt.safetensors" --dtype $dt --dump 'blocks.1.*' final_norm_out
    expect_rc 0 "$H3" inspect "$WORK/$layout-$dt.safetensors" --json
    python3 - "$WORK/out.txt" <<'PY' || fail "dit output tensors ($layout $dt)"
import json, sys
r = json.load(open(sys.argv[1]))
# sample + audio_sample + 4 blocks.1.* + final_norm_out
assert r["tensors"]["tensors"] == 7, r["tensors"]
PY
  done
done
# both formats write byte-identical outputs
cmp -s "$WORK/diffusers-fp32.safetensors" "$WORK/original-fp32.safetensors" || fail "formats differ (fp32)"
cmp -s "$WORK/diffusers-bf16.safetensors" "$WORK/original-bf16.safetensors" || fail "formats differ (bf16)"
# AdaLN cache: written once, then hit; the output is unchanged
expect_rc 0 "$H3" dit --model "$DATA/A/diffusers" --inputs "$DATA/A/inputs.safetensors" --output "$WORK/c1.safetensors" \
  --adaln-cache "$WORK/cache"
grep -q "cache written" "$WORK/err.txt" || fail "no cache written"
expect_rc 0 "$H3" dit --model "$DATA/A/diffusers" --inputs "$DATA/A/inputs.safetensors" --output "$WORK/c2.safetensors" \
  --adaln-cache "$WORK/cache"
grep -q "cache hit" "$WORK/err.txt" || fail "no cache hit"
cmp -s "$WORK/c1.safetensors" "$WORK/c2.safetensors" || fail "cached tables changed the output"
# bad input: a token tag out of range → usage error naming the field; a file lacking inputs → 3; missing → 3
python3 - "$DATA/A/inputs.safetensors" "$WORK/bad_tags.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n]); data = bytearray(raw[8 + n:])
info = head["token_tags"]; b = info["data_offsets"][0]
size = {"I64": 8, "I32": 4}[info["dtype"]]
data[b:b + size] = (7).to_bytes(size, "little", signed=True)
open(sys.argv[2], "wb").write(raw[:8 + n] + bytes(data))
PY
expect_rc 2 "$H3" dit --model "$DATA/A/diffusers" --inputs "$WORK/bad_tags.safetensors" --output "$WORK/x.safetensors"
grep -q "token_tags" "$WORK/err.txt" || fail "bad token tag not named"
expect_rc 3 "$H3" dit --model "$DATA/A/diffusers" --inputs "$WORK/c1.safetensors" --output "$WORK/x.safetensors"
grep -q "hidden_states" "$WORK/err.txt" || fail "missing input not named"
expect_rc 3 "$H3" dit --model "$DATA/A/diffusers" --inputs "$WORK/nope.safetensors" --output "$WORK/x.safetensors"
expect_rc 2 "$H3" dit --model "$DATA/A/diffusers" --inputs "$DATA/A/inputs.safetensors" --output "$WORK/x.safetensors" \
  --device cuda:7
echo "dit: all checks passed"
