#!/usr/bin/env bash
# h3-engine bench request: one t2va request through the Generator with random weights supplied to the model
# store (here at the tiny checkpoint's widths on the CPU): the JSON report's stage times, steps and rows, the
# MP4 it muxes, determinism of the random components, and the usage errors.
source "$(dirname "$0")/lib/common.sh" "$@"
"$H3" make-tiny "$WORK/tiny" --seed 1 > /dev/null || fail "make-tiny"
# the tiny checkpoint's weights are not read: remove them, keep the configs and the tokenizer
find "$WORK/tiny" -name '*.safetensors' -delete
BENCH=("$H3" bench request --random-weights --configs "$WORK/tiny" --device cpu --size 64x32 --frames 107)
"${BENCH[@]}" --steps 3 --seed 5 --json --output "$WORK/a.mp4" > "$WORK/a.json" 2> "$WORK/a.err" ||
  { cat "$WORK/a.err"; fail "bench request exited $?"; }
python3 - "$WORK/a.json" "$WORK/a.mp4" <<'PY' || fail "report"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["bench"] == "request" and j["task"] == "t2va", j
assert (j["width"], j["height"], j["frames"], j["grid_points"], j["forwards"]) == (64, 32, 107, 3, 2), j
assert len(j["step_seconds"]) == 2 and all(s > 0 for s in j["step_seconds"]), j["step_seconds"]
for k in ("seconds_encode", "seconds_denoise", "seconds_decode", "seconds_mux", "seconds_total"):
    assert j[k] > 0, (k, j[k])
assert j["seconds_total"] >= j["seconds_denoise"] + j["seconds_decode"], j
assert j["conditioning_rows"] > 10, j["conditioning_rows"]
assert j["written"] == [sys.argv[2]], j["written"]
loads = j["metrics"]["component_loads"]
assert loads["transformer"] == loads["text_encoder"] == loads["vae_decoder"] == loads["audio_vae_decoder"] == 1, loads
print("bench request report ok:", j["geometry"], f'{j["seconds_total"]:.2f} s')
PY
head -c 12 "$WORK/a.mp4" | grep -q ftyp || fail "a.mp4 is not an MP4"
# the same request again: the random components are deterministic
"${BENCH[@]}" --steps 3 --seed 5 --output "$WORK/b.mp4" > "$WORK/b.txt" 2> "$WORK/b.err" || fail "second run"
grep -q "request bench: 64x32, 107 frames" "$WORK/b.txt" || { cat "$WORK/b.txt"; fail "text report"; }
cmp -s "$WORK/a.mp4" "$WORK/b.mp4" || fail "two runs of the same request differ"
# the weights streamed (DiT and text stack layerwise from host masters): the same MP4, the placement reported
"${BENCH[@]}" --steps 3 --seed 5 --residency layerwise --resident-blocks 0 --json --output "$WORK/l.mp4" \
  > "$WORK/l.json" 2> "$WORK/l.err" || { cat "$WORK/l.err"; fail "layerwise bench request exited $?"; }
grep -q '"placement": "weights: DiT layerwise (first 0 resident' "$WORK/l.json" || fail "layerwise placement"
cmp -s "$WORK/a.mp4" "$WORK/l.mp4" || fail "layerwise request differs from the resident one"
# a budget the request cannot meet is an error before any weight moves
"${BENCH[@]}" --steps 3 --gpu-memory-budget 64KiB > /dev/null 2> "$WORK/m.err"; [ $? -ne 0 ] || fail "tiny budget"
grep -q "budget" "$WORK/m.err" || { cat "$WORK/m.err"; fail "tiny budget message"; }
# --warmup: the engine's warm-up first, reported apart (its forward sized the DiT's workspace, its decode ran);
# the metrics carry the one-time work per forward (none after the first); the same MP4 as without it
"${BENCH[@]}" --steps 3 --seed 5 --warmup --json --output "$WORK/w.mp4" > "$WORK/w.json" 2> "$WORK/w.err" ||
  { cat "$WORK/w.err"; fail "bench request --warmup exited $?"; }
python3 - "$WORK/w.json" <<'PY' || fail "warm-up report"
import json, sys
j = json.load(open(sys.argv[1]))
w = j["warmup"]
assert w["seconds"] > 0 and len(w["step_seconds"]) == 1, w
assert w["metrics"]["first_forward"]["workspace_allocations"] > 0, w["metrics"]["first_forward"]
assert w["metrics"]["decode_seconds"] > 0, "the warm-up of an MP4 request decodes"
m = j["metrics"]
keys = {"gemm_tunings", "gemm_tuning_seconds", "attention_plans", "attention_plan_seconds",
        "workspace_allocations", "workspace_bytes", "graph_recordings", "graph_recording_seconds"}
assert set(m["first_forward"]) == keys and set(m["per_step"][1]["one_time"]) == keys, m["first_forward"]
assert m["per_step"][1]["one_time"]["workspace_allocations"] == 0, m["per_step"][1]
print("bench request --warmup ok:", f'{w["seconds"]:.2f} s warm-up')
PY
cmp -s "$WORK/a.mp4" "$WORK/w.mp4" || fail "the warm-up changed the request's MP4"
grep -q '"warmup": null' "$WORK/a.json" || fail "without --warmup the report's warmup is null"
# --keep-loaded: the engine opened as a server's (the DiT and the decoders loaded once, for the warm-up, and kept
# for the request; the text stack per job); the same MP4; the denoise parts add up to the stage
"${BENCH[@]}" --steps 3 --seed 5 --warmup --keep-loaded --json --output "$WORK/k.mp4" > "$WORK/k.json" \
  2> "$WORK/k.err" || { cat "$WORK/k.err"; fail "bench request --keep-loaded exited $?"; }
python3 - "$WORK/k.json" "$WORK/w.json" <<'PY' || fail "keep-loaded report"
import json, sys
k, w = (json.load(open(f)) for f in sys.argv[1:3])
assert k["keep_loaded"] is True and w["keep_loaded"] is False, (k["keep_loaded"], w["keep_loaded"])
kl, wl = k["metrics"]["component_loads"], w["metrics"]["component_loads"]
assert kl["transformer"] == kl["vae_decoder"] == kl["audio_vae_decoder"] == 1 and kl["text_encoder"] == 2, kl
assert wl["transformer"] == wl["vae_decoder"] == 2, wl
assert "transformer resident" in k["metrics"]["placement"], k["metrics"]["placement"]
for j in (k, w):
    parts = j["metrics"]["denoise_parts"]
    assert abs(sum(parts.values()) - j["seconds_denoise"]) < 1e-9, (parts, j["seconds_denoise"])
    assert abs(parts["steps_seconds"] - sum(j["step_seconds"])) < 1e-9, parts
print("bench request --keep-loaded ok: loads", kl)
PY
cmp -s "$WORK/a.mp4" "$WORK/k.mp4" || fail "--keep-loaded changed the request's MP4"
# usage: --random-weights is required; a bad size names the field
"$H3" bench request --configs "$WORK/tiny" --device cpu > /dev/null 2>&1; [ $? -eq 2 ] || fail "no --random-weights"
"${BENCH[@]/64x32/100x64}" --steps 3 > /dev/null 2> "$WORK/c.err"; [ $? -eq 2 ] || fail "bad size rc"
grep -q "size" "$WORK/c.err" || { cat "$WORK/c.err"; fail "bad size message"; }
echo "bench_request: all checks passed"
